"""Sans-IO per-channel bookkeeping that is pure AMQP: publisher confirms and tx buffers."""

from __future__ import annotations

import enum
from collections.abc import Callable

from roost.amqp import codec_methods as m
from roost.amqp.codec import encode_method_frame


class Mode(enum.Enum):
    NORMAL = "normal"
    CONFIRM = "confirm"
    TX = "tx"


class ConfirmTracker:
    """Sequence numbers for published messages and the acks/nacks owed for them.

    Results may arrive out of order (a transient message is confirmed at once, a persistent
    one after fsync); ``frames`` turns what is settled into as few basic.ack/nack frames as
    the ``multiple`` flag allows without ever covering a still-pending number. The common
    case, every result an ack and none behind a pending number, is one multiple ack with no
    work per message beyond two dict steps (this module is compiled: issue 27).
    """

    def __init__(self) -> None:
        self.last_seq = 0
        # published, not settled: ascending, as numbers are only ever added in order
        self._unsettled: dict[int, None] = {}
        self._settled: dict[int, bool] = {}  # seq -> ack? for settled seqs not yet sent
        self._nacks = 0  # how many of _settled are nacks
        self._top = 0  # the highest seq in _settled

    def publish(self) -> int:
        seq = self.last_seq + 1
        self.last_seq = seq
        self._unsettled[seq] = None
        return seq

    def unconfirmed(self) -> int:
        """Publishes whose ack or nack the client has not been sent yet."""
        return len(self._unsettled) + len(self._settled)

    def settle(self, seq: int, ok: bool) -> None:
        unsettled = self._unsettled
        if seq not in unsettled:
            return  # not pending (settled already): its result stands
        del unsettled[seq]  # `in` and `del` are mypyc primitives; dict.pop is a method call
        self._settled[seq] = ok
        if not ok:
            self._nacks += 1
        if seq > self._top:
            self._top = seq

    @property
    def has_output(self) -> bool:
        return bool(self._settled)

    def frames(self, channel: int) -> list[bytes]:
        settled, top = self._settled, self._top
        if not settled:
            return []
        first = _first(self._unsettled)
        if not self._nacks and (first == 0 or first > top):
            # all acks, none behind a pending number: one multiple ack covers them
            out = [_settle_frame(channel, top, True, multiple=True)]
        else:
            out = _mixed_frames(channel, settled, first)
        settled.clear()
        self._nacks = self._top = 0
        return out


def _first(unsettled: dict[int, None]) -> int:
    """The lowest pending number, 0 when none is pending."""
    for seq in unsettled:
        return seq
    return 0


def _mixed_frames(channel: int, settled: dict[int, bool], first: int) -> list[bytes]:
    """Frames for results that include nacks or sit behind the pending number ``first``
    (0: none pending): the leading run, the numbers below ``first``, as multiple acks and
    nacks, one per change between the two; then the rest one by one."""
    lead: list[bytes] = []
    behind: list[bytes] = []
    run_ok: bool | None = None
    run_end = 0
    for seq in sorted(settled):
        ok = settled[seq]
        if first and seq > first:
            behind.append(_settle_frame(channel, seq, ok, multiple=False))
            continue
        if run_ok is not None and ok != run_ok:
            lead.append(_settle_frame(channel, run_end, run_ok, multiple=True))
        run_ok, run_end = ok, seq
    if run_ok is not None:
        lead.append(_settle_frame(channel, run_end, run_ok, multiple=True))
    return lead + behind


def _settle_frame(channel: int, seq: int, ok: bool, *, multiple: bool) -> bytes:
    method = (
        m.BasicAck(delivery_tag=seq, multiple=multiple)
        if ok
        else m.BasicNack(delivery_tag=seq, multiple=multiple, requeue=False)
    )
    return encode_method_frame(channel, method)


class TxBuffer:
    """Work held back until tx.commit (publishes, acks) or dropped at tx.rollback."""

    def __init__(self) -> None:
        self._ops: list[Callable[[], None]] = []

    def add(self, op: Callable[[], None]) -> None:
        self._ops.append(op)

    def take(self) -> list[Callable[[], None]]:
        ops, self._ops = self._ops, []
        return ops

    def clear(self) -> None:
        self._ops.clear()
