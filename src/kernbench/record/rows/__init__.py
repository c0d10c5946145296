"""The rows: the op log writer and its compact columns, ``tensors.parquet``,
``access.parquet`` and ``shared.parquet``.
"""
