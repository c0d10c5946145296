"""Cases: kernel + grid + HBM tensors + params + reference, and the built-in case registry."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernbench.errors import BadInputError, KernbenchError, closest
from kernbench.schemas.dtypes import DType, by_name

ROLES = ("input", "output", "inout")


@dataclass(frozen=True)
class Init:
    """How a tensor's initial contents are made; serialisable as plain JSON."""

    kind: str  # "randn" | "zeros" | "arange" | "data"
    seed: int = 0
    scale: float = 1.0
    array: np.ndarray | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> str:
        body: dict[str, Any] = {"kind": self.kind}
        if self.kind == "randn":
            body.update(seed=self.seed, scale=self.scale)
        return json.dumps(body, sort_keys=True)

    def make(self, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        return INIT_MAKERS[self.kind](self, shape, dtype)


def _randn(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    rng = np.random.default_rng(init.seed)
    return (rng.standard_normal(shape, dtype=np.float32) * init.scale).astype(dtype.np)


def _zeros(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    return np.zeros(shape, dtype=dtype.np)


def _arange(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dtype.np)


def _data(init: Init, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    arr = np.asarray(init.array)
    if arr.shape != tuple(shape):
        raise BadInputError(f"kb.data array has shape {arr.shape}, tensor wants {tuple(shape)}")
    return arr.astype(dtype.np)


INIT_MAKERS: dict[str, Callable[[Init, tuple[int, ...], DType], np.ndarray]] = {
    "randn": _randn, "zeros": _zeros, "arange": _arange, "data": _data,
}


def init_from_json(text: str, data: bytes | None = None, *,
                   shape: tuple[int, ...] = (), dtype: DType | None = None) -> Init:
    """Rebuild an Init from the JSON stored in ``tensors.parquet`` (plain data, no code)."""
    body = json.loads(text)
    kind = body.get("kind")
    if kind not in INIT_MAKERS:
        raise BadInputError(f"unknown init kind {kind!r}")
    if kind == "data":
        if data is None or dtype is None:
            raise BadInputError("init 'data' without stored bytes")
        arr = np.frombuffer(data, dtype=dtype.np).reshape(shape)
        return Init("data", array=arr)
    return Init(kind, seed=int(body.get("seed", 0)), scale=float(body.get("scale", 1.0)))


def randn(seed: int = 0, scale: float = 1.0) -> Init:
    return Init("randn", seed=seed, scale=scale)


def zeros() -> Init:
    return Init("zeros")


def arange() -> Init:
    return Init("arange")


def data(array: np.ndarray) -> Init:
    return Init("data", array=np.asarray(array))


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: DType
    init: Init
    role: str = "input"

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


def tensor(shape: tuple[int, ...] | list[int], dtype: str | DType, *, init: Init | None = None,
           role: str = "input") -> TensorSpec:
    """Declare an HBM tensor of a case."""
    if role not in ROLES:
        raise BadInputError(f"tensor role {role!r} is not one of {ROLES}")
    try:
        dt = by_name(dtype)
    except KeyError as exc:
        raise BadInputError(str(exc.args[0])) from None
    shape = tuple(int(s) for s in shape)
    if any(s <= 0 for s in shape):
        raise BadInputError(f"tensor shape {shape} has a non-positive dimension")
    return TensorSpec(shape, dt, init or Init("zeros"), role)


@dataclass(frozen=True)
class Case:
    """A runnable workload."""

    name: str
    kernel: Any
    grid: tuple[int, ...]
    tensors: Mapping[str, TensorSpec]
    params: Mapping[str, Any] = field(default_factory=dict)
    reference: Callable[..., dict[str, np.ndarray]] | None = None
    #: the factory arguments that rebuild this case (set by the registry)
    case_params: Mapping[str, Any] | None = None
    #: the factory that built it, as data (``module:qualname``), and whether it is registered
    factory: str | None = None
    builtin: bool = False

    def inputs(self) -> dict[str, np.ndarray]:
        """The initial contents of every tensor, by name."""
        return {n: t.init.make(t.shape, t.dtype) for n, t in self.tensors.items()}


CaseFactory = Callable[..., Case]
_REGISTRY: dict[str, CaseFactory] = {}


def kernel_name(kernel: Any) -> str:
    """The kernel's stable name as the manifest records it (``module:qualname``)."""
    name = getattr(kernel, "name", None)
    if isinstance(name, str) and hasattr(kernel, "fn"):
        return name
    return f"{getattr(kernel, '__module__', '?')}:{getattr(kernel, '__qualname__', '?')}"


def json_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The params that survive a JSON manifest (scalars); others rebuild from defaults."""
    return {k: v for k, v in params.items()
            if v is None or isinstance(v, bool | int | float | str)}


def register_case(name: str) -> Callable[[CaseFactory], CaseFactory]:
    """Register a case factory under ``name`` (``kernbench record NAME -p K=V``).

    The registered factory marks every Case it returns as built in, with its factory spec and
    the full parameters it was built with, so a replay can rebuild it by name.
    """

    def deco(factory: CaseFactory) -> CaseFactory:
        spec = f"{factory.__module__}:{factory.__qualname__}"

        @functools.wraps(factory)
        def build(*args: Any, **kwargs: Any) -> Case:
            case = factory(*args, **kwargs)
            if not isinstance(case, Case):
                return case
            bound = inspect.signature(factory).bind(*args, **kwargs)
            bound.apply_defaults()
            return dataclasses.replace(case, factory=spec, builtin=True,
                                       case_params=json_params(bound.arguments))

        _REGISTRY[name] = build
        return build

    return deco


def registry() -> dict[str, CaseFactory]:
    import kernbench.kernels  # noqa: F401  (registers the built-in cases)

    return dict(_REGISTRY)


def factory_params(factory: CaseFactory) -> dict[str, Any]:
    """The factory's parameters and their defaults."""
    sig = inspect.signature(factory)
    return {n: p.default for n, p in sig.parameters.items()
            if p.default is not inspect.Parameter.empty}


def _check_names(name: str, factory: CaseFactory, params: Mapping[str, Any]) -> None:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    known = [n for n, p in sig.parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise BadInputError(f"case {name!r} has no parameter(s) {unknown}"
                            f"{closest(unknown[0], known)}; known: {sorted(known)}")


def build_case(name: str, params: Mapping[str, Any] | None = None,
               factory: CaseFactory | None = None, spec: str | None = None) -> Case:
    """Build a registered case (or ``factory``'s, named ``spec``) from its parameters."""
    builtin = factory is None
    if factory is None:
        reg = registry()
        if name not in reg:
            raise BadInputError(f"unknown case {name!r}{closest(name, reg)}; known: "
                                f"{', '.join(sorted(reg))}")
        factory = reg[name]
    params = dict(params or {})
    _check_names(name, factory, params)
    known = factory_params(factory)
    for key, value in params.items():
        default = known.get(key)
        want = type(default)
        ok = (isinstance(value, want) and not (want is int and isinstance(value, bool))) or (
            want is float and isinstance(value, int) and not isinstance(value, bool))
        if default is not None and not ok:
            raise BadInputError(f"case {name!r} parameter {key} expects {want.__name__} "
                                f"(default {default!r}), got {value!r}")
    try:
        case = factory(**params)
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise BadInputError(f"case {name!r} rejected its parameters {params}: {exc}") from None
    except KernbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - a user's factory; one line, not a traceback
        raise BadInputError(f"case {name!r}: the factory raised {type(exc).__name__}: {exc}"
                            ) from None
    if not isinstance(case, Case):
        raise BadInputError(f"case {name!r}: the factory returned {type(case).__name__}, "
                            "not a kernbench Case")
    full = json_params({**known, **params})
    if builtin:
        return dataclasses.replace(case, case_params=full, builtin=True)
    return dataclasses.replace(case, case_params=full, builtin=False,
                               factory=spec or f"{factory.__module__}:{factory.__qualname__}")


def build_user_case(case: str, items: tuple[str, ...] | list[str]) -> Case:
    """``kernbench record CASE|MODULE:FUNC -p K=V``: the built-in case or the user's factory
    (imported from this process's sys.path, then the current directory), built with the
    ``-p`` values typed by the factory's signature."""
    from kernbench.factory import load_user_factory
    from kernbench.params import parse_params

    if ":" not in case:
        return build_case(case, parse_params(items, registry().get(case)))
    factory = load_user_factory(case)
    return build_case(case, parse_params(items, factory), factory=factory, spec=case)


def describe_cases() -> str:
    """One block per built-in case: name, first doc line, parameters with defaults."""
    lines = []
    for name, factory in sorted(registry().items()):
        doc = (factory.__doc__ or "").strip().splitlines()
        lines.append(f"{name}  {doc[0] if doc else ''}".rstrip())
        params = factory_params(factory)
        if params:
            lines.append("    " + "  ".join(f"{k}={v}" for k, v in params.items()))
    return "\n".join(lines)
