"""roost/lifecycle.py on a memory broker and a fake clock: the read loop's order and
bounds, login (password, EXTERNAL with and without a certificate), the core connection
as opened, and a release that gives back what the connection held, once."""

from __future__ import annotations

import pytest

from roost import lifecycle
from roost.backpressure import FRAMES_PER_TURN, TURN_BYTES, ReadGate
from roost.core import Traffic
from roost.core.errors import AccessRefused
from tests.brokers import memory_broker
from tests.fake_clock import FakeClock


class Session(lifecycle.ReadLoop):
    """Frames are single bytes; each is handled by appending it to ``handled``."""

    def __init__(self, clock: FakeClock) -> None:
        self.gate = ReadGate(self, clock)
        self.traffic = Traffic()
        self.closed = False
        self.buffer = b""
        self.handled = b""
        self.calls: list[str] = []
        self.paused = False

    def heard(self) -> None:
        self.calls.append("heard")

    def feed(self, data: bytes) -> None:
        self.calls.append("feed")
        self.buffer += data

    def work(self) -> None:
        self.calls.append("work")
        gate = self.gate
        while gate.open and self.buffer:
            self.handled += self.buffer[:1]
            self.buffer = self.buffer[1:]
            gate.left -= 1
            if not gate.left:
                gate.end_turn()

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def owes_acks(self) -> bool:
        return False

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        pass

    def alarm_unblocked(self) -> None:
        pass


def test_a_read_is_counted_fed_worked_and_bounded_to_a_turn() -> None:
    clock = FakeClock()
    session = Session(clock)
    session.data_received(b"abc")
    assert session.calls == ["heard", "feed", "work"]
    assert session.handled == b"abc"
    assert (session.traffic.recv_oct, session.traffic.recv_cnt) == (3, 1)
    # more frames than a turn's share (both reads in one turn of the loop): the rest
    # waits in the codec's buffer and the socket is paused
    session.data_received(b"x" * (FRAMES_PER_TURN + 5))
    assert len(session.handled) == FRAMES_PER_TURN
    assert session.paused
    clock.advance(0)  # the next turn of the loop
    assert len(session.handled) == 3 + FRAMES_PER_TURN + 5
    assert not session.paused
    # one large read ends the turn whatever its frames cost (libuv would read again)
    session.buffer = b""
    session.handled = b""
    session.work = lambda: None  # type: ignore[method-assign]  # handled later, say
    session.data_received(b"y" * TURN_BYTES)
    assert session.paused
    session.closed = True
    session.data_received(b"late")
    assert session.traffic.recv_cnt == 3 and b"late" not in session.handled


def test_login_by_password_and_by_certificate() -> None:
    port = memory_broker()
    peer = "127.0.0.1:5000"
    user = lifecycle.login(port, "guest", "guest", external=False, cert_user=None, peer=peer,
                           protocol="TEST")  # fmt: skip
    assert user.name == "guest"
    with pytest.raises(AccessRefused):
        lifecycle.login(port, "guest", "wrong", external=False, cert_user=None, peer=peer,
                        protocol="TEST")  # fmt: skip
    with pytest.raises(AccessRefused, match="verified client certificate"):
        lifecycle.login(port, "", "", external=True, cert_user=None, peer=peer, protocol="TEST")
    external = lifecycle.login(port, "", "", external=True, cert_user="guest", peer=peer,
                               protocol="TEST")  # fmt: skip
    assert external.name == "guest"
    assert lifecycle.plain_credentials(b"\x00guest\x00secret") == ("guest", "secret")
    assert lifecycle.plain_credentials(b"guest:secret") is None


def test_open_and_release_give_back_what_the_connection_held() -> None:
    port = memory_broker()
    session = Session(FakeClock())
    user = lifecycle.login(port, "guest", "guest", external=False, cert_user=None,
                           peer="127.0.0.1:5000", protocol="TEST")  # fmt: skip
    closed: list[str] = []
    client = lifecycle.open_client(
        port, session.gate, user, "/", protocol="TEST 1", peer="127.0.0.1:5000",
        closer=closed.append, properties={}, traffic=session.traffic, tls=True,
        mechanism="PLAIN",
    )  # fmt: skip
    assert client.ssl and client.auth_mechanism == "PLAIN"
    assert session.gate.client is client
    port.declare_queue(client, "mine", exclusive=True)
    assert port.is_connected(client)
    assert lifecycle.release(port, client, "test over", session.gate)
    assert not port.is_connected(client)
    assert session.gate.closed
    assert "mine" not in port.vhosts["/"].queues  # the exclusive queue went with it
    assert not lifecycle.release(port, client, "again", session.gate)  # once only


def test_timers_keep_one_per_purpose_and_cancel_what_they_replace() -> None:
    """A session's timers by purpose (MQTT's CONNECT deadline and keepalive check): a
    purpose set again replaces its timer, whose callback then never runs; a connection
    that reschedules its keepalive for an hour still holds one timer, not 360."""
    clock = FakeClock()
    timers = lifecycle.Timers(clock)
    fired: list[str] = []
    timers.set("connect", 10, fired.append, "connect")
    timers.set("connect", 20, fired.append, "connect again")
    clock.advance(15)
    assert fired == []  # the replaced deadline was cancelled

    def check() -> None:
        fired.append("keepalive")
        timers.set("keepalive", 10, check)  # rescheduled from its own callback

    timers.set("keepalive", 10, check)
    clock.advance(3600)
    assert fired.count("keepalive") == 360 and "connect again" in fired
    assert len(timers) == 2  # one per purpose, however many times each was set
    timers.cancel_all()
    clock.advance(3600)
    assert fired.count("keepalive") == 360 and len(timers) == 0
