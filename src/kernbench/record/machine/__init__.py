"""The machine: the PE driver, its engines, the scoreboard, resident programs, asynchronous
issue, IPCQ, composite GEMMs, pipelined loops, the timing models and TCM allocation.
"""
