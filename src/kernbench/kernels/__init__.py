"""The kernel library: built-in cases, registered by name when ``kernels.registry`` first
looks a name up (its modules are imported then, not by this package: ADR-0635)."""
