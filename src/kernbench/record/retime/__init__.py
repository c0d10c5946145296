"""``kb.retime``: a trace's op stream timed again on other hardware."""

from kernbench.record.retime.run import retime

__all__ = ["retime"]
