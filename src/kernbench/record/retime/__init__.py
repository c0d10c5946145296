"""``kb.retime``: a trace's op stream timed again on other hardware (SPEC §16)."""

from kernbench.record.retime.run import retime

__all__ = ["retime"]
