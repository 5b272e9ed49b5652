"""The server's publisher-confirm bookkeeping (``amqp/channel.py``): the acks and nacks
it sends for any order of results, checked against a plain model of the rule."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.amqp import codec_methods as m
from roost.amqp.channel import ConfirmTracker
from roost.amqp.codec import NEED_DATA, FrameReader
from roost.amqp.frames import MethodFrame

CHANNEL = 3


def sent(frames: list[bytes]) -> list[tuple[str, int, bool]]:
    """The frames as (ack|nack, delivery tag, multiple), decoded by the server's codec."""
    reader = FrameReader(expect_protocol_header=False)
    reader.feed(b"".join(frames))
    out = []
    while isinstance(frame := reader.next_frame(), MethodFrame):
        method = frame.method
        assert frame.channel == CHANNEL
        assert isinstance(method, m.BasicAck | m.BasicNack)
        if isinstance(method, m.BasicNack):
            assert not method.requeue
        kind = "ack" if isinstance(method, m.BasicAck) else "nack"
        out.append((kind, method.delivery_tag, method.multiple))
    assert frame is NEED_DATA
    return out


class Model:
    """The rule, kept simple: every unsent number in order; the settled ones before the
    first pending one go as multiple frames, one per change between ack and nack; the
    settled ones behind a pending number go one by one, in order."""

    def __init__(self) -> None:
        self.unsent: list[int] = []
        self.results: dict[int, bool] = {}

    def frames(self) -> list[tuple[str, int, bool]]:
        out: list[tuple[str, int, bool]] = []
        lead = []
        for seq in self.unsent:
            if seq not in self.results:
                break
            lead.append(seq)
        for seq in lead:
            if out and out[-1][0] == _kind(self.results[seq]):
                out[-1] = (out[-1][0], seq, True)
            else:
                out.append((_kind(self.results[seq]), seq, True))
        behind = sorted(s for s in self.results if s not in lead)
        out += [(_kind(self.results[s]), s, False) for s in behind]
        self.unsent = [s for s in self.unsent if s not in self.results]
        self.results.clear()
        return out


def _kind(ok: bool) -> str:
    return "ack" if ok else "nack"


def test_results_in_order_all_acked_go_as_one_multiple_ack() -> None:
    tracker = ConfirmTracker()
    for _ in range(5):
        tracker.settle(tracker.publish(), True)
    assert tracker.unconfirmed() == 5
    assert sent(tracker.frames(CHANNEL)) == [("ack", 5, True)]
    assert tracker.unconfirmed() == 0
    assert not tracker.has_output


def test_a_pending_number_is_never_covered() -> None:
    tracker = ConfirmTracker()
    seqs = [tracker.publish() for _ in range(4)]  # 1..4
    tracker.settle(seqs[0], True)
    tracker.settle(seqs[2], True)
    tracker.settle(seqs[3], False)
    assert sent(tracker.frames(CHANNEL)) == [
        ("ack", 1, True), ("ack", 3, False), ("nack", 4, False)]
    assert tracker.unconfirmed() == 1
    tracker.settle(seqs[1], True)
    assert sent(tracker.frames(CHANNEL)) == [("ack", 2, True)]


def test_a_second_result_for_a_number_is_ignored() -> None:
    tracker = ConfirmTracker()
    seq = tracker.publish()
    tracker.settle(seq, True)
    tracker.settle(seq, False)
    assert sent(tracker.frames(CHANNEL)) == [("ack", 1, True)]
    tracker.settle(seq, False)  # after it was sent, too
    assert not tracker.has_output


# each step: publish some, settle the pending numbers picked (by index, with their
# result), or send what is due
STEP = st.one_of(
    st.tuples(st.just("publish"), st.integers(1, 5)),
    st.tuples(st.just("settle"), st.lists(st.tuples(st.integers(0, 30), st.booleans()),
                                          max_size=6)),
    st.tuples(st.just("frames"), st.just(0)),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(STEP, max_size=40))
def test_frames_follow_the_rule_for_any_order_of_results(steps: list[tuple[str, object]]) -> None:
    tracker, model = ConfirmTracker(), Model()
    pending: list[int] = []
    for action, arg in [*steps, ("frames", 0)]:
        if action == "publish":
            assert isinstance(arg, int)
            for _ in range(arg):
                seq = tracker.publish()
                model.unsent.append(seq)
                pending.append(seq)
        elif action == "settle":
            assert isinstance(arg, list)
            for index, ok in arg:
                if pending:
                    seq = pending.pop(index % len(pending))
                    tracker.settle(seq, ok)
                    model.results[seq] = ok
        else:
            assert tracker.has_output == bool(model.results)
            assert sent(tracker.frames(CHANNEL)) == model.frames()
            assert tracker.unconfirmed() == len(model.unsent)
