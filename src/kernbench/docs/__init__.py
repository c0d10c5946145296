"""The project's documentation as something that runs (docs/adr/0800, 0801).

``blocks`` reads the fenced blocks of README.md and docs/*.md and the ``<!-- doctest: ... -->``
comment before each; ``session`` runs a document's blocks in order in a scratch folder, as a
reader would; ``shell`` runs an ``sh`` block and checks the figures it prints; ``pictures``
regenerates docs/pictures/ from the blocks that draw them (``python -m kernbench.docs``).
The doc tests (the repository's root ``conftest.py``, through Sybil) and the picture command
share this one reading of the docs.
"""
