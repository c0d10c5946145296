"""The HBM stack: the address interleave in closed form, channels served FIFO."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from kernbench.record.machine.shared.hbm import NO_CHANNEL, HbmStack, channel_bytes
from kernbench.record.machine.shared.server import LoggedServer
from kernbench.trace.hw import PRESETS, HwConfig
from tests.record.machine.shared.intervals import conserving, work_conserving

V3 = PRESETS["ahbm-v3"]


def _by_block(addr: int, nbytes: int, block: int, channels: int) -> list[int]:
    """The definition, one byte at a time."""
    out = [0] * channels
    for a in range(addr, addr + nbytes):
        out[(a // block) % channels] += 1
    return out


@given(st.integers(0, 5_000), st.integers(0, 3_000), st.integers(1, 300), st.integers(1, 9))
def test_channel_bytes_match_the_interleave_byte_by_byte(addr, nbytes, block, channels):
    assert channel_bytes(addr, nbytes, block, channels) == _by_block(addr, nbytes, block,
                                                                    channels)


def test_channel_bytes_of_a_long_transfer_are_counted_not_walked():
    # 1 GiB from an unaligned start (4M blocks): channel 0 holds the 156-byte head and the
    # 100-byte tail, one block between them; every channel holds 1/16 of it
    assert channel_bytes(100, 1 << 30, 256, 16) == [1 << 26] * 16
    # one block more: block 4M is whole on channel 0 now, and the tail moves to channel 1
    got = channel_bytes(100, (1 << 30) + 256, 256, 16)
    assert got[:3] == [(1 << 26) + 156, (1 << 26) + 100, 1 << 26]


def _hw(**fields) -> HwConfig:
    return dataclasses.replace(V3, **fields)


def test_a_transfer_is_done_when_its_slowest_channel_is():
    hw = _hw(hbm_total_gbps=64, hbm_channels=4, hbm_interleave_bytes=256)  # 16 B/ns a channel
    stack = HbmStack(hw)
    # 1280 B from 0: blocks 0..4 -> channel 0 holds blocks 0 and 4 (512 B), others 256 B
    done, ideal, channel = stack.transfer(1_000, 0, 1_280)
    assert (done, ideal, channel) == (1_000 + 32_000, 1_000 + 32_000, 0)
    # a second transfer at the same time waits behind the first on every channel it shares
    done, ideal, channel = stack.transfer(1_000, 256, 256)  # block 1: channel 1
    assert (done, ideal, channel) == (1_000 + 16_000 + 16_000, 1_000 + 16_000, 1)
    assert stack.bytes == 1_536


def test_a_whole_stripe_names_the_lowest_of_the_channels_that_end_last():
    hw = _hw(hbm_total_gbps=64, hbm_channels=4, hbm_interleave_bytes=256)  # 16 ns a block
    stack = HbmStack(hw)
    assert stack.transfer(0, 256, 256) == (16_000, 16_000, 1)  # channel 1 busy to 16 ns
    assert stack.transfer(0, 0, 256) == (16_000, 16_000, 0)  # channel 0 too
    # a whole stripe: channels 0 and 1 end at 32 ns, 2 and 3 at 16 ns; 0 is named
    assert stack.transfer(0, 0, 1024) == (32_000, 16_000, 0)
    assert [stack.free(c) for c in range(4)] == [32_000, 32_000, 16_000, 16_000]
    # later, the stack idle: every channel ends together, and channel 0 is named
    assert stack.transfer(40_000, 4096, 1024) == (56_000, 56_000, 0)


def test_disjoint_streams_share_the_stack_at_its_total():
    """N transfers of S bytes at once, each over every channel: together they take
    N * S / hbm_total_gbps, whatever the per-PE ports would allow."""
    stack = HbmStack(V3)  # 819.2 GB/s over 16 channels of 256 B
    size = 16 * 256 * 8  # 32 KiB: 8 blocks on each channel
    ends = [stack.transfer(0, pe * (1 << 20), size)[0] for pe in range(8)]
    total = 8 * size * Fraction(1000) / Fraction("819.2")
    assert max(ends) == -(-total // 1)  # exact: every channel holds 8 * 8 blocks
    assert ends == sorted(ends)


def test_serve_shares_is_a_transfer_of_several_runs():
    stack, twin = HbmStack(V3), HbmStack(V3)
    runs = [(0, 100), (4_096, 300), (70_000, 64)]
    shares = [sum(c) for c in zip(*(stack.shares(a, n) for a, n in runs), strict=True)]
    got = stack.serve_shares(5, shares)
    ends = [twin.transfer(5, a, n)[0] for a, n in runs]
    assert got[0] == max(ends) and stack.bytes == twin.bytes == 464


def test_an_unlimited_stack_costs_nothing():
    stack = HbmStack(PRESETS["ahbm-v2"])
    assert stack.unlimited
    assert stack.transfer(7, 0, 1 << 20) == (7, 7, NO_CHANNEL)
    assert HbmStack(V3).transfer(7, 0, 0) == (7, 7, NO_CHANNEL)


def test_channels_are_named_as_the_contention_file_names_them():
    assert HbmStack(V3).resource(3) == "hbm.ch3"


TRANSFERS = st.lists(st.tuples(st.integers(0, 2_000), st.integers(0, 1 << 16),
                               st.integers(0, 20_000)), max_size=25)
#: aligned whole stripes (the stack's O(1) path) mixed with anything else
ALIGNED = st.lists(st.tuples(st.integers(0, 3_000), st.integers(0, 64).map(lambda s: s * 4096),
                             st.sampled_from([4096, 8192, 3 * 4096, 100, 5_000])), max_size=25)


class Reference:
    """The definition: one Server per channel, each serving its channel_bytes share."""

    def __init__(self, hw: HwConfig) -> None:
        rate = Fraction(str(hw.hbm_total_gbps)) / hw.hbm_channels
        self.servers = [LoggedServer(rate) for _ in range(hw.hbm_channels)]
        self.hw = hw

    def transfer(self, t: int, addr: int, n: int) -> tuple[int, int, int]:
        shares = channel_bytes(addr, n, self.hw.hbm_interleave_bytes, self.hw.hbm_channels)
        done, channel, most = t, NO_CHANNEL, 0
        for c, share in enumerate(shares):
            if share:
                end = self.servers[c].serve(t, share)
                if end > done:
                    done, channel = end, c
                most = max(most, share)
        return done, t + self.servers[0].cost(most), channel


def _run(hw: HwConfig, transfers: list[tuple[int, int, int]]):
    stack, ref, t, answers = HbmStack(hw), Reference(hw), 0, []
    for dt, addr, n in transfers:
        t += dt
        got = stack.transfer(t, addr, n)
        assert got == ref.transfer(t, addr, n)
        assert [stack.free(c) for c in range(hw.hbm_channels)] == [
            s.free for s in ref.servers]
        answers.append(got)
    return stack, ref, answers


@given(st.integers(1, 20_000).map(lambda x: x / 10), st.integers(1, 8),
       st.sampled_from([64, 256, 1000]), TRANSFERS)
def test_the_stack_answers_as_one_fifo_server_per_channel(gbps, channels, block, transfers):
    hw = _hw(hbm_total_gbps=gbps, hbm_channels=channels, hbm_interleave_bytes=block)
    _run(hw, transfers)


@given(st.sampled_from([8, 16]), ALIGNED)
def test_whole_stripes_and_odd_transfers_mixed_answer_as_the_servers_do(channels, transfers):
    hw = _hw(hbm_channels=channels, hbm_interleave_bytes=4096 // channels)
    _run(hw, transfers)


@given(st.integers(1, 20_000).map(lambda x: x / 10), st.integers(1, 8),
       st.sampled_from([64, 256, 1000]), TRANSFERS)
def test_every_channel_conserves_and_never_idles_while_a_transfer_waits(
        gbps, channels, block, transfers):
    hw = _hw(hbm_total_gbps=gbps, hbm_channels=channels, hbm_interleave_bytes=block)
    stack, ref, answers = _run(hw, transfers)
    rate = Fraction(str(gbps)) / channels
    for server in ref.servers:  # the stack answered exactly as these did
        assert conserving(server.log, rate) and work_conserving(server.log)
    assert stack.bytes == sum(n for _, _, n in transfers) == sum(s.bytes for s in ref.servers)
    assert stack.busy_ps == sum(s.busy_ps for s in ref.servers)
    for (done, ideal, channel), (_, _, n) in zip(answers, transfers, strict=True):
        assert done >= ideal and (channel == NO_CHANNEL) == (n == 0)
    assert _run(hw, transfers)[2] == answers  # the same requests, the same answers
