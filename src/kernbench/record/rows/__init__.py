"""The rows: the op log writer and its compact columns, ``tensors.parquet`` and
``access.parquet``.
"""
