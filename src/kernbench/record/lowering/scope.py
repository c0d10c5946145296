"""``tl.scratch_scope``: save-points on the kernel-scratch cursor (ADR-0063)."""

from __future__ import annotations

from typing import Any, Literal

from kernbench.record.commands import Cmd, Resolve, new_cmd
from kernbench.record.handle import Scope
from kernbench.record.machine.context import current
from kernbench.record.source import src_here
from kernbench.schemas.ops import OP

_ENTER, _EXIT = OP.SCOPE_ENTER, OP.SCOPE_EXIT


class scratch_scope:  # noqa: N801 - the tl spelling
    """``with tl.scratch_scope():`` records the scratch cursor and rewinds to it on exit,
    after waiting for in-flight loads that land in the rewound bytes."""

    __slots__ = ("ctx", "scope")

    def __enter__(self) -> Scope:
        ctx = self.ctx = current()
        src = src_here()
        scope = self.scope = Scope(ctx.scratch.cursor, src, len(ctx.scopes) + 1)
        ctx.scopes.append(scope)
        cmd = new_cmd(Cmd, (_ENTER, (), None, 0, 0, (), src, 0, f'{{"cursor":{scope.saved}}}'))
        ctx.emit(cmd)
        return scope

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        ctx, scope = self.ctx, self.scope
        hi = ctx.scratch.cursor
        if ctx.unresolved and exc_type is None:  # a recv_async landing in the rewound bytes
            unresolved = [b for b in ctx.unresolved
                          if b.space == "tcm" and scope.saved <= b.addr < hi]
            if unresolved:
                ctx.issue(Resolve(unresolved))
        scope.alive = False
        ctx.scratch.rewind(scope.saved)
        if exc_type is None:
            cmd = new_cmd(Cmd, (_EXIT, (), None, 0, 0, (scope.saved, hi), src_here(), 0,
                                f'{{"hi":{hi},"lo":{scope.saved}}}'))
            ctx.emit(cmd)
        ctx.scopes.pop()
        return False
