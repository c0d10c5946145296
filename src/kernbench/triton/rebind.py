"""Rebinding a Triton kernel's Python function to kernbench's ``triton.language``.

The function is rebuilt (``types.FunctionType`` over the same code object, so source lines
stay the user's) with globals and closure cells in which every Triton object it reaches is
kernbench's: the ``triton`` / ``triton.language`` / ``math`` / ``libdevice`` modules, ``tl.*``
functions and dtypes by qualified name, other ``@triton.jit`` helpers (rebuilt the same way),
``tl.constexpr(...)`` globals as plain values. Python's ``range``, ``min`` and ``max`` become
what Triton's compiler makes of them (``tl.range``, ``tl.minimum``, ``tl.maximum``)."""

from __future__ import annotations

import builtins
import inspect
import types
from collections.abc import Callable
from typing import NoReturn, TypeGuard

from kernbench.errors import KernelError, UnsupportedError
from kernbench.record.source import src_here
from kernbench.triton import (
    boolops,
    core,
    extra,
    language,
    libdevice,
    mathops,
    random,
    standard,
    standin,
    tlmath,
)
from kernbench.triton import dtypes as d
from kernbench.triton.value import tensor

#: Triton module name -> kernbench's module (the longest matching prefix wins)
MODULES: dict[str, types.ModuleType] = {
    "triton": standin, "triton.language": language, "triton.language.core": language,
    "triton.language.standard": standard, "triton.language.semantic": language,
    "triton.language.math": tlmath, "triton.language.extra": extra,
    "triton.language.extra.libdevice": libdevice, "triton.language.extra.cuda": extra,
    "triton.language.extra.cuda.libdevice": libdevice,
    "triton.language.extra.hip.libdevice": libdevice,
    "triton.language.random": random,
}
_KERNEL_CLASSES = frozenset({"JITFunction", "Autotuner", "Heuristics", "ConstexprFunction"})


def _module_for(name: str) -> types.ModuleType | None:
    best = None
    for prefix, mod in MODULES.items():
        if (name == prefix or name.startswith(prefix + ".")) and (
                best is None or len(prefix) > len(best[0])):
            best = (prefix, mod)
    return best[1] if best else None


def _unsupported(qualname: str) -> Callable[..., NoReturn]:
    def stub(*args: object, **kwargs: object) -> NoReturn:
        raise language.Unsupported(f"{qualname} is not supported by kernbench: its Triton "
                                   "front end does not implement it", src_here())
    stub.__name__ = stub.__qualname__ = qualname.rsplit(".", 1)[-1]
    return stub


def _is_triton(mod: object) -> TypeGuard[str]:
    return isinstance(mod, str) and (mod == "triton" or mod.startswith("triton."))


def _folded(python: Callable[..., object], tl_fn: Callable[[object, object], object],
            name: str) -> Callable[..., object]:
    """Python's ``min``/``max`` inside a kernel: Python's over plain values, else the ``tl``
    function folded over the arguments, as Triton's compiler makes of them."""
    def fn(*args: object, **kwargs: object) -> object:
        if kwargs or len(args) < 2 or not any(isinstance(a, tensor) for a in args):
            return python(*args, **kwargs)
        out = args[0]
        for a in args[1:]:
            out = tl_fn(out, a)
        return out
    fn.__name__ = fn.__qualname__ = name
    return fn


BUILTINS = {"range": core.builtin_range, "min": _folded(builtins.min, mathops.minimum, "min"),
            "max": _folded(builtins.max, mathops.maximum, "max"), **boolops.HELPERS}


class Rebinder:
    """One rebinding pass: functions and globals dicts are rebuilt once each (cycles of
    helpers calling each other resolve through the memo)."""

    def __init__(self) -> None:
        self._functions: dict[int, types.FunctionType] = {}
        self._globals: dict[int, dict[str, object]] = {}
        self._modules: dict[int, types.ModuleType] = {}

    def function(self, fn: types.FunctionType) -> types.FunctionType:
        got = self._functions.get(id(fn))
        if got is not None:
            return got
        new_globals = self.globals_of(fn.__globals__)
        code, freevars = boolops.code_of(fn)  # and/or/not as Triton reads them
        closure = None
        if fn.__closure__:
            cells = dict(zip(fn.__code__.co_freevars, fn.__closure__, strict=True))
            closure = tuple(types.CellType(self.value(_cell(cells[v]))) for v in freevars)
        new = types.FunctionType(code, new_globals, fn.__name__,
                                 self._defaults(fn.__defaults__), closure)
        self._functions[id(fn)] = new
        new.__kwdefaults__ = ({k: self.value(v) for k, v in fn.__kwdefaults__.items()}
                              if fn.__kwdefaults__ else None)
        new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
        new.__annotations__ = dict(getattr(fn, "__annotations__", {}))
        new.__dict__.update(getattr(fn, "__dict__", {}))
        new.__wrapped_triton__ = fn  # type: ignore[attr-defined]
        return new

    def _defaults(self, defaults: tuple[object, ...] | None) -> tuple[object, ...] | None:
        return None if defaults is None else tuple(self.value(v) for v in defaults)

    def globals_of(self, g: dict[str, object]) -> dict[str, object]:
        got = self._globals.get(id(g))
        if got is not None:
            return got
        new: dict[str, object] = {}
        self._globals[id(g)] = new
        for k, v in g.items():
            new[k] = v if k.startswith("__") else self.value(v)
        for k, v in BUILTINS.items():
            new.setdefault(k, v)
        return new

    def value(self, v: object) -> object:
        """kernbench's counterpart of one value a kernel body can reach."""
        cls = type(v)
        if cls.__name__ == "constexpr" and hasattr(v, "value"):
            return self.value(v.value)
        if isinstance(v, types.ModuleType):
            if getattr(v, "KERNBENCH_STAND_IN", False):
                return _module_for(v.__name__) or v
            if _is_triton(v.__name__):
                return _module_for(v.__name__)
            return self._module(v) if _holds_kernels(v) else v
        if _is_kernel(v):
            inner = v
            while not inspect.isfunction(inner) and hasattr(inner, "fn"):
                inner = inner.fn
            if inspect.isfunction(inner) and inner.__module__ == "triton.language.random":
                return self._named(inner.__module__, inner.__name__)  # ours, not its source
            return self.function(inner) if inspect.isfunction(inner) else v
        if _is_triton(cls.__module__):
            return self._object(v)
        if inspect.isfunction(v) or inspect.isclass(v) or inspect.isbuiltin(v):
            mod = getattr(v, "__module__", None)
            if _is_triton(mod):
                return self._named(mod, v.__name__)
        return v

    def _module(self, mod: types.ModuleType) -> types.ModuleType:
        """A user module holding ``@triton.jit`` helpers (``mylib.helper(x)``): a view whose
        attributes are rebound on access, one view per module."""
        got = self._modules.get(id(mod))
        if got is None:
            got = self._modules[id(mod)] = ModuleView(mod, self)
        return got

    def _object(self, v: object) -> object:
        """A Triton instance: dtypes by name, others refused when used."""
        name = type(v).__name__
        if name == "dtype" and hasattr(v, "name"):
            try:
                return d.by_name(v.name)
            except KernelError:
                return _unsupported(f"tl.{v.name}")
        if name == "pointer_type" and hasattr(v, "element_ty"):
            elem = self._object(v.element_ty)
            if isinstance(elem, d.dtype):
                return d.pointer_type(elem)
            return _unsupported(f"tl.pointer_type({v.element_ty!r})")
        return v

    def _named(self, mod: str, name: str) -> object:
        target = _module_for(mod)
        if target is None:
            return _unsupported(f"{mod}.{name}")
        if target is libdevice:
            return libdevice.FUNCTIONS.get(name) or _unsupported(f"libdevice.{name}")
        if name == "constexpr":
            return language.constexpr
        try:
            return getattr(target, name)
        except UnsupportedError:  # refused by name: the same refusal when called
            return _refused_when_called(target, name)
        except AttributeError:
            return _unsupported(f"{mod}.{name}")


def _refused_when_called(target: types.ModuleType, name: str) -> Callable[..., object]:
    """A stub that raises, at its call, what ``target.name`` raises (a module's global that
    names an unsupported Triton function breaks only the kernels that call it)."""
    def stub(*args: object, **kwargs: object) -> object:
        return getattr(target, name)(*args, **kwargs)
    stub.__name__ = stub.__qualname__ = name
    return stub


def _is_kernel(v: object) -> bool:
    cls = type(v)
    return (cls.__name__ in _KERNEL_CLASSES and _is_triton(cls.__module__)
            or isinstance(v, standin.JITFunction | standin.Autotuner | standin.Heuristics))


def _holds_kernels(mod: types.ModuleType) -> bool:
    """A module whose globals hold a Triton kernel or a ``tl.constexpr`` (a user's helper
    library), as opposed to numpy, math and the like, which stay themselves."""
    return any(_is_kernel(v) or type(v).__name__ == "constexpr"
               for v in list(vars(mod).values()))


class ModuleView(types.ModuleType):
    """A user module as a kernel body sees it: each attribute rebound on first access."""

    def __init__(self, mod: types.ModuleType, rebinder: Rebinder) -> None:
        super().__init__(mod.__name__, mod.__doc__)
        self.__dict__["_kb_module"], self.__dict__["_kb_rebinder"] = mod, rebinder

    def __getattr__(self, name: str) -> object:
        value = self.__dict__["_kb_rebinder"].value(getattr(self.__dict__["_kb_module"], name))
        self.__dict__[name] = value
        return value


def _cell(c: types.CellType) -> object:
    try:
        return c.cell_contents
    except ValueError:  # an empty cell (a name bound later)
        return None


def rebind(fn: types.FunctionType) -> types.FunctionType:
    """``fn`` rebuilt against kernbench's ``triton.language`` (one pass)."""
    return Rebinder().function(fn)
