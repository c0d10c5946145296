"""Guarded paths (ADR-0840): the value graph a recording keeps when a kernel
decides on data (``graph.py``), HBM's tensors and their recorded writes (``hbm.py``), and
the evaluator that computes a decision's cone through the op families' semantics in
``schemas/`` (``evaluate.py``). The PE machine times the guard (``machine/guard.py``)."""
