"""The performance harness behind ``kernbench bench`` (``bench.run``): one module per section."""
