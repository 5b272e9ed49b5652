"""One connection's life as the core sees it, the same for every protocol adapter
(AMQP, STOMP over TCP and WebSocket, MQTT over TCP and WebSocket, the stream protocol).

- **Reading**: ``ReadLoop.data_received`` is every session's read path: count the bytes,
  hand them to the codec, work through the frames while the connection's ``ReadGate``
  (roost/backpressure.py) is open, then tell the gate the read is done, so a read's
  size and a turn's share of work are bounded by one rule everywhere.
- **Login**: ``login`` is the password or certificate (EXTERNAL) check; the broker
  counts failed logins, throttles them and logs password failures, this logs failed
  certificate logins. ``plain_credentials`` reads a SASL PLAIN response.
- **Opening**: ``open_client`` is the core's connection (the user's rights in the vhost,
  connection limits), marked TLS or not and with its mechanism for the management API,
  and hands it to the gate, which then blocks it on resource alarms.
- **Release**: ``release`` gives back everything the connection held in the core (its
  sessions' unacked messages requeue, its consumers and exclusive queues go, its
  publishers stop being held) and keeps the close reason for the management API.

``SessionTransport`` (and ``Transport``, TCP's, which may also be flushed) is what a
session asks of its plumbing, ``Clock`` its time and timers, ``Timers`` its timers by
purpose (MQTT uses all three; STOMP and the stream protocol still declare their own,
docs/architecture.md says what is left). Each adapter keeps what is its
own: its protocol's refusal codes, its frames, its sessions (AMQP channels, MQTT wills,
stream subscriptions) which it closes before it calls ``release``. This module does
no I/O (like the sessions that use it) and reaches the core only through the adapter
port."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from mypy_extensions import mypyc_attr

from roost.core.errors import AccessRefused

if TYPE_CHECKING:
    from collections.abc import Callable

    from roost.backpressure import ReadGate, Timer
    from roost.core import Traffic
    from roost.core.ports.adapter import AdapterPort, Client

log = logging.getLogger("roost.lifecycle")


class SessionTransport(Protocol):
    """What every sans-IO session asks of its plumbing, TCP or WebSocket
    (roost/plumbing.py's ``TcpPlumbing`` and ``WebSocketPlumbing``, or a test's fake):
    the peer, output, closing, and pausing input."""

    peer: str
    tls: bool
    # CN of the verified TLS client certificate, if any (EXTERNAL, or a protocol's
    # certificate login when the client names no user)
    cert_user: str | None

    def write(self, data: bytes) -> None: ...

    def close(self, *, going_away: bool = False) -> None:
        """Flush what was written, then close; ``going_away`` when the server is stopping
        (WebSocket close code 1001)."""

    def abort(self) -> None: ...

    def pause_reading(self) -> None:
        """Read no more input until ``resume_reading`` (roost/backpressure.py)."""

    def resume_reading(self) -> None: ...


class Transport(SessionTransport, Protocol):
    """A session's TCP plumbing (``TcpPlumbing``), whose output it may also flush."""

    def flush(self) -> None: ...

    def flush_soon(self) -> None: ...


class Clock(Protocol):
    """Time and callbacks, handed in by the plumbing (the asyncio loop, or a test's fake
    clock): a session does no I/O and owns no event loop."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object: ...


class Timers:
    """A session's timers, one per purpose (its CONNECT deadline, its keepalive check):
    setting a purpose again replaces its timer, ``cancel_all`` at close cancels what is
    left. A connection holds one timer per purpose however long it lives, never the
    ones that already fired."""

    __slots__ = ("_clock", "_timers")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._timers: dict[str, Timer] = {}

    def set(self, purpose: str, delay: float, callback: Callable[..., object], *args: Any) -> None:
        old = self._timers.get(purpose)
        if old is not None:
            old.cancel()  # harmless for the one running now
        self._timers[purpose] = self._clock.call_later(delay, callback, *args)

    def cancel(self, purpose: str) -> None:
        timer = self._timers.pop(purpose, None)
        if timer is not None:
            timer.cancel()

    def cancel_all(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return len(self._timers)


# compiled (docs/compiled.md); the MQTT and stream sessions are interpreted subclasses
@mypyc_attr(allow_interpreted_subclasses=True)
class ReadLoop:
    """The read path of a session: ``data_received`` feeds the codec and works through
    what it parsed, within the gate's bounds. A session says whether it has closed
    (``closed``), how it notes that its peer was heard from (``heard``, for heartbeats),
    how bytes reach its codec (``feed``) and how it handles the frames read so far while
    ``gate.open`` (``work``, spending ``gate.left``)."""

    gate: ReadGate
    traffic: Traffic
    closed: bool

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.heard()
        traffic = self.traffic
        traffic.recv_oct += len(data)
        traffic.recv_cnt += 1
        self.feed(data)
        self.work()
        self.gate.read_done(len(data))

    def heard(self) -> None:
        """The peer sent something (it is alive, whatever the heartbeat timer thinks)."""

    def feed(self, data: bytes) -> None:
        raise NotImplementedError

    def work(self) -> None:
        raise NotImplementedError


def peer_host(peer: str) -> str:
    """The host part of a ``host:port`` peer (for loopback-only users and throttling)."""
    return peer.rsplit(":", 1)[0].strip("[]")


def plain_credentials(response: bytes, errors: str = "replace") -> tuple[str, str] | None:
    """(user, password) from a SASL PLAIN response (``authzid NUL user NUL password``),
    None when it is not one."""
    parts = response.split(b"\x00")
    if len(parts) != 3:
        return None
    return parts[1].decode("utf-8", errors), parts[2].decode("utf-8", errors)


def login(
    port: AdapterPort,
    username: str,
    password: str,
    *,
    external: bool,
    cert_user: str | None,
    peer: str,
    protocol: str,
) -> Any:
    """The user this connection logs in as: with ``external``, the verified client
    certificate's name (``cert_user``), refused without one; else the password.
    Raises ``AccessRefused``."""
    host = peer_host(peer)
    if not external:
        return port.authenticate(username, password, peer_host=host, protocol=protocol, peer=peer)
    try:
        if cert_user is None:
            raise AccessRefused("EXTERNAL needs a verified client certificate")
        return port.authenticate_external(cert_user, peer_host=host)
    except AccessRefused as exc:  # password failures are logged by the broker
        log.warning("%s: %s EXTERNAL login failed for %r: %s", peer, protocol, cert_user,
                    exc.text)  # fmt: skip
        raise


def open_client(
    port: AdapterPort,
    gate: ReadGate,
    user: Any,
    vhost: str,
    *,
    protocol: str,
    peer: str,
    closer: Callable[[str], None],
    properties: dict[str, Any],
    traffic: Traffic,
    tls: bool,
    mechanism: str,
) -> Client:
    """The core's connection for ``user`` in ``vhost`` (rights and limits checked: a
    ``BrokerError`` refuses it); ``closer(reason)`` closes it from the broker's side.
    From now on a resource alarm blocks it once it publishes."""
    client = port.connect(
        user, vhost, protocol=protocol, peer=peer, closer=closer, properties=properties,
        traffic=traffic,
    )  # fmt: skip
    client.ssl = tls
    client.auth_mechanism = mechanism
    gate.client = client
    gate.watch_alarms(port.alarms)
    return client


def release(
    port: AdapterPort,
    client: Client | None,
    reason: str,
    gate: ReadGate,
    *,
    reading_on: bool = False,
) -> bool:
    """Give back what the connection held in the core, once its own sessions are closed:
    the core closes its sessions (unacked messages requeue), cancels its consumers,
    deletes its exclusive queues and keeps ``reason`` for the management API. No queue
    or alarm holds it any more; with ``reading_on`` (a close handshake still to read)
    the gate stays usable, else it is done. Idempotent; True if the core's connection
    was closed by this call."""
    if reading_on:
        gate.release()
    else:
        gate.close()
    if client is not None and port.is_connected(client):
        port.disconnect(client, reason)
        return True
    return False
