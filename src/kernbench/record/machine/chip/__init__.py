"""The chip: one machine for the whole accelerator (docs/hardware-model.md, docs/adr/0735).

Shared parts — HBM, each PE's TCM port, routed links, each PE's issue port — make every PE's
timing depend on the others', so the chip decides every op's start in one global time order
across all PEs (an event loop), while the kernels run as greenlets that issue ops at their
own clocks and stop only where they need an answer the machine has not decided yet. The
PE-by-PE closed-form machine of ``ahbm-v1``/``ahbm-v2`` (``record/machine/pe.py``) stays as
it is; the chip times any hardware whose shared parts are modelled (``HwConfig.shared``).

- ``node.py``: an op in flight, from its issue to its decided start and end;
- ``board.py``: which earlier ops an op's data waits for (RAW, WAR, WAW) while they are
  still undecided; ``segments.py``: one memory's accesses by segment, and their prune;
- ``engines.py``: an engine's queues and its arbitration (``in_order``, ``ready_first``);
- ``program.py``: a resident program as the kernel sees its PE: the op handlers;
- ``loop.py``: the event loop, the programs' greenlets, slots and the rows in op order;
  ``turns.py``: whose turn it is, a program's or a decision's, and the hand-overs;
- ``ipcq.py``: messages between PEs, routed over the topology;
- ``guard.py``: a decision on data (docs/adr/0843): the value graph noted as ops issue, the
  guard waiting for its operand and for every decision due by its time;
- ``atomics.py``: a PE's atomics start in the order its programs issue them.
"""
