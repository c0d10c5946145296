"""Tests of the Triton front end (kernbench.triton)."""
