"""The kernel library: built-in cases, registered by name on import (``kernels.registry``)."""

from kernbench.kernels import examples, flash, gqa, ring, streaming  # noqa: F401
