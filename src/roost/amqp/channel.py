"""Sans-IO per-channel bookkeeping that is pure AMQP: publisher confirms and tx buffers."""

from __future__ import annotations

import enum
from collections import deque
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
    the ``multiple`` flag allows without ever covering a still-pending number.
    """

    def __init__(self) -> None:
        self.last_seq = 0
        self._pending: deque[int] = deque()  # unsettled seqs, ascending
        self._settled: dict[int, bool] = {}  # seq -> ack? for settled seqs not yet sent

    def publish(self) -> int:
        self.last_seq += 1
        self._pending.append(self.last_seq)
        return self.last_seq

    def unconfirmed(self) -> int:
        """Publishes whose ack or nack the client has not been sent yet."""
        return len(self._pending)

    def settle(self, seq: int, ok: bool) -> None:
        self._settled[seq] = ok

    @property
    def has_output(self) -> bool:
        return bool(self._settled)

    def frames(self, channel: int) -> list[bytes]:
        out: list[bytes] = []
        pending, settled = self._pending, self._settled
        # leading run: every seq up to the first unsettled one, grouped by ack/nack
        run_ok: bool | None = None
        run_end = 0
        while pending and pending[0] in settled:
            seq = pending.popleft()
            ok = settled.pop(seq)
            if run_ok is not None and ok != run_ok:
                out.append(_settle_frame(channel, run_end, run_ok, multiple=True))
            run_ok, run_end = ok, seq
        if run_ok is not None:
            out.append(_settle_frame(channel, run_end, run_ok, multiple=True))
        # the rest sit behind an unsettled seq: settle them one by one
        for seq in sorted(settled):
            out.append(_settle_frame(channel, seq, settled[seq], multiple=False))
            pending.remove(seq)
        settled.clear()
        return out


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
