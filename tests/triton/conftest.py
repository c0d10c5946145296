"""The Triton-syntax kernels of ``tests/triton/kernels`` as test parameters.

Each entry names a kernel module, its case factory, its launch factory (the same launch as a
``Launch``, for references and the interpreter) and the parameters of one run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import kernbench as kb

PACKAGE = "tests.triton.kernels"

#: Python source that makes this process a machine without Triton wheels: a finder first on
#: ``sys.meta_path`` refuses ``triton`` and ``triton.*`` (prepended to a child's ``-c`` code)
NO_TRITON = """
import importlib.abc, sys
class NoTriton(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoTriton())
"""


@dataclass(frozen=True)
class Entry:
    id: str
    module: str
    case: str = "case"
    launch: str = "launch"
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def case_spec(self) -> str:
        return f"{PACKAGE}.{self.module}:{self.case}"

    @property
    def launch_spec(self) -> str:
        return f"{PACKAGE}.{self.module}:{self.launch}"

    def factory(self) -> Callable[..., Any]:
        return getattr(importlib.import_module(f"{PACKAGE}.{self.module}"), self.case)

    def make_launch(self) -> Any:
        mod = importlib.import_module(f"{PACKAGE}.{self.module}")
        return getattr(mod, self.launch)(**self.params)


#: the issue's seven kernels (and variants that take other paths through them)
KERNELS = [
    Entry("vector-add-ragged-tail", "vector_add"),
    Entry("softmax-masked-columns", "softmax"),
    Entry("matmul-grouped-masked-k", "matmul"),
    Entry("layer-norm-two-pass", "layer_norm"),
    Entry("flash-attention-causal-block-ptr", "flash_attention"),
    Entry("flash-attention-causal-ragged", "flash_attention", params={"n_ctx": 40}),
    Entry("embedding-gather", "embedding"),
    Entry("atomic-add-across-programs", "atomic_sum"),
    Entry("rms-norm-module-helpers", "rms_norm"),
    Entry("gqa-flash-decoding-trans", "gqa_decode"),
    Entry("ops-elementwise", "ops", "unary_case", "unary_launch"),
    Entry("ops-reductions-by-axis", "ops", "reduce_case", "reduce_launch"),
    Entry("ops-layout-dot-cast-atomic", "ops", "layout_case", "layout_launch"),
    Entry("matmul-tma-descriptors", "tma", "matmul_case", "matmul_launch"),
    Entry("descriptor-edge-tiles-padding", "tma", "shifted_case", "shifted_launch"),
]

#: kernels that pin Triton's semantics (closed-form references)
SEMANTICS = [
    Entry("c-style-divmod", "semantics", "divmod_case", "divmod_launch"),
    Entry("mixed-dtype-promotion", "semantics", "promote_case", "promote_launch"),
    Entry("reduction-accumulator-types", "semantics", "reduce_case", "reduce_launch"),
    Entry("other-and-masked-stores", "semantics", "masked_case", "masked_launch"),
    Entry("wide-integers-wrap-divmod-shift-cast", "integers", "wide_case", "wide_launch"),
]

#: 64-bit and small integers in the style of the public libraries (issue 29; the other
#: kernels of ``kernels/integers.py`` replay in process in ``test_integers.py``)
INTEGERS = [
    Entry("cross-entropy-int64-targets-ignore-index", "integers", "cross_entropy_case",
          "cross_entropy_launch"),
]

#: Triton's random numbers, bit for bit: seeds and offsets concrete (computed while recording)
#: and data (``philox`` rows replay computes: issue 38)
RANDOM = [
    Entry("dropout-philox-rand", "dropout"),
    Entry("random-randn-randint-64-bit", "dropout", "random_case", "random_launch"),
    Entry("dropout-seed-loaded", "random_data", "dropout_case", "dropout_launch"),
    Entry("rand4x-int64-row-seeds-loaded", "random_data", "rows_case", "rows_launch"),
    Entry("randint4x-loaded-counters-n-rounds", "random_data", "counters_case",
          "counters_launch"),
    Entry("philox-randn4x-block-seeds-loaded", "random_data", "philox_case", "philox_launch"),
]

#: kernels whose control flow depends on loaded data (issue 38: guards). The first four
#: compute on integer-valued data, so they must agree with the interpreter bit for bit
GUARDS = [
    Entry("guard-varlen-lengths-early-return", "guards", "varlen_case", "varlen_launch"),
    Entry("guard-page-table-per-page", "guards", "paged_case", "paged_launch"),
    Entry("guard-while-on-data", "guards", "halve_case", "halve_launch"),
    Entry("guard-spin-lock-atomic-cas", "guards", "locked_case", "locked_launch"),
    Entry("guard-liger-cross-entropy-ignore-index", "guards", "cross_entropy_case",
          "cross_entropy_launch"),
    Entry("guard-liger-jsd-labels", "guards", "jsd_case", "jsd_launch"),
    Entry("guard-serving-decode-paged-split-kv", "guards", "serving_case", "serving_launch"),
]

ALL = KERNELS + INTEGERS + SEMANTICS + RANDOM + GUARDS
#: compared with Triton's interpreter bit for bit
EXACT = SEMANTICS + RANDOM + GUARDS[:4]


def params(entries: list[Entry]) -> Any:
    return pytest.mark.parametrize("entry", entries, ids=[e.id for e in entries])


@pytest.fixture(scope="session")
def replayed(tmp_path_factory: pytest.TempPathFactory, kb_replay_pool: kb.ReplayPool
             ) -> Callable[[Entry], tuple[Any, Any]]:
    """``replayed(entry)`` -> (kb.Trace, kb.ReplayResult): the entry recorded and replayed
    (by a warm replay child of the session's pool, verified against its reference) once per
    session and worker."""
    done: dict[str, tuple[Any, Any]] = {}

    def get(entry: Entry) -> tuple[Any, Any]:
        if entry.id not in done:
            factory = entry.factory()
            path = tmp_path_factory.mktemp("triton") / f"{entry.id}.ktrace"
            trace = kb.record(kb.build_case(entry.id, entry.params, factory=factory), path)
            done[entry.id] = trace, kb.replay(path, case=factory, pool=kb_replay_pool)
        return done[entry.id]

    return get
