"""The kernel front end's lowering: ``tl`` calls (and the Triton front end's) become commands
for the machine: op semantics, operands, addressing, scopes and lifetimes, record-time bounds.
"""
