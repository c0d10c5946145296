"""Phase 1: the tl emulator, greenlet kernel runner, SimPy timing model and trace writer."""
