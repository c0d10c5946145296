"""Triton-syntax kernels (unmodified Triton modules) and their case factories, for the tests."""
