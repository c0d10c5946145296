"""IPCQ peers (``record/lowering/comm.py``, ADR-0750): a send or
receive names ``"next"``, ``"prev"`` or a PE index of the launch; anything else is one line
naming the kernel's line and the value, on every machine."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from click.testing import CliRunner

import kernbench as kb
from kernbench import tl
from kernbench.cli import main

HW = ["ahbm-v1", "ahbm-v2", "ahbm-v3"]


@kb.kernel
def send_to(x, *, dest):
    tl.send(dest, tl.zeros((4,), tl.float32))


@kb.kernel
def recv_from(x, *, src):
    tl.recv(src, (4,), tl.float32)


def _record(rec, kernel, grid=(4,), hw="ahbm-v1", **params):
    return rec(kernel, {"x": kb.tensor((1,), "float32")}, grid=grid, params=params, hw=hw)


@pytest.mark.parametrize("hw", HW)
@pytest.mark.parametrize("dest", [4, -1, 99])
def test_a_pe_index_outside_the_launch_is_a_kernel_error_naming_the_line(rec, hw, dest):
    with pytest.raises(kb.KernelError, match=rf"test_ipcq_peers.py:\d+: send names PE {dest}, "
                                             r"not a PE of this launch \(PEs 0..3"):
        _record(rec, send_to, hw=hw, dest=dest)


def test_a_launch_of_fewer_programs_than_pes_uses_only_their_pes(rec):
    with pytest.raises(kb.KernelError, match=r"recv names PE 5, not a PE of this launch "
                                             r"\(PEs 0..1: n_pe = 8"):
        _record(rec, recv_from, grid=(2,), src=5)


@pytest.mark.parametrize("hw", HW)
def test_sending_to_or_receiving_from_the_programs_own_pe_is_refused(rec, hw):
    @kb.kernel
    def to_self(x):
        tl.send(tl.program_id(0), tl.zeros((4,), tl.float32))

    with pytest.raises(kb.KernelError, match=r"send names PE 0, the program's own PE"):
        _record(rec, to_self, hw=hw)

    @kb.kernel
    def from_self(x):
        tl.recv(tl.program_id(0), (4,), tl.float32)

    with pytest.raises(kb.KernelError, match=r"recv names PE 0, the program's own PE"):
        _record(rec, from_self, hw=hw)


@pytest.mark.parametrize("peer", [1.0, True, None, [1]])
def test_a_peer_that_is_neither_a_direction_nor_an_int_is_refused(rec, peer):
    @kb.kernel
    def odd(x):
        tl.send(peer, tl.zeros((4,), tl.float32))

    with pytest.raises(kb.KernelError, match=r"send names .* an IPCQ peer is 'next', 'prev' "
                                             r"or a PE index \(an int\)"):
        _record(rec, odd)


def test_a_numpy_integer_is_a_pe_index(rec):
    @kb.kernel
    def pair(x):
        p = tl.program_id(0)
        if p == 0:
            tl.send(np.int64(1), tl.zeros((4,), tl.float32))
        else:
            tl.recv(np.int32(0), (4,), tl.float32)

    trace = _record(rec, pair, grid=(2,))
    assert trace.ops.filter(trace.ops["name"].cast(str) == "recv").height == 1


def test_the_cli_shows_a_bad_peer_as_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the CLI finds MODULE:FUNC in the current directory
    monkeypatch.delitem(sys.modules, "badpeer", raising=False)
    mod = tmp_path / "badpeer.py"
    mod.write_text(
        "import kernbench as kb\nfrom kernbench import tl\n\n\n@kb.kernel\n"
        "def k(x):\n    tl.send(7, tl.zeros((4,), tl.float32))\n\n\n"
        "def case():\n    return kb.Case(name='b', kernel=k, grid=(2,),\n"
        "                   tensors={'x': kb.tensor((1,), 'float32')})\n")
    result = CliRunner().invoke(main, ["record", "badpeer:case", "-o", "b.ktrace"])
    sys.modules.pop("badpeer", None)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    line = [x for x in result.output.splitlines() if x.strip()]
    assert len(line) == 1 and "badpeer.py:7: send names PE 7" in line[0]
    assert not (tmp_path / "b.ktrace").exists()
