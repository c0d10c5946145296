"""The shared memory system the chip prices (docs/hardware-model.md, "What the shared parts
cost"): one resource, the ``Server`` (``server.py``), and the parts made of it — the HBM
stack's channels (``hbm.py``), each PE's TCM port (``tcm.py``) and the links between PEs
(``fabric.py``). Each part answers in closed form, in integer picoseconds, for requests
made in time order; the chip-wide machine decides that order.
"""
