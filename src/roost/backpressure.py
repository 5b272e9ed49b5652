"""When a connection reads its socket: the same rules for every protocol adapter.

Each connection (AMQP, STOMP over TCP or WebSocket, and the adapters to come) owns one
``ReadGate``. It reads while no *reason* to stop is in effect, and while one is, the
frames already read wait in the codec's buffer and the socket is not read
(``pause_reading``), so TCP pushes back on the client, as RabbitMQ's credit flow does:

* ``CONGESTION``: a queue this connection published to is congested (core/flow.py:
  its ready backlog reached the high watermark while it has consumers). Unless the
  connection owes acks: they arrive on this socket, and without them the queue holding
  it (maybe through this very consumer) could never drain. So a connection that
  publishes and consumes with manual acks on one socket keeps going while it has
  deliveries outstanding. A congested queue whose consumers stop making progress is
  *stalled* and lets its publishers go (the watchdog here asks it about once a second;
  a consumer waiting for its own socket to drain is progress, see core/flow.py); a
  queue without consumers holds nobody.
* ``ALARM``: a memory or disk alarm is in effect and the connection published since it
  was raised (RabbitMQ blocks publishing connections, not consumers). Unlike
  congestion it holds a connection that owes acks too: reading more publishes is what
  must stop.
* ``TURN``: the connection did its share of work in this loop iteration
  (``FRAMES_PER_TURN`` frames, or a read of ``TURN_BYTES`` or more) and is read again
  on the next one (``call_soon``). libuv reads a busy socket up to 32 times per poll
  (256 KiB each under uvloop); without this a producer that writes faster than the
  broker parses gets megabytes of work per iteration while its consumers' acks wait
  (a STOMP producer of 1 KiB SENDs once starved a client-individual consumer to
  ~600 msg/s this way).

A paused connection's heartbeats wait unread too, so ``paused`` tells the heartbeat
timers not to count them as missed. The management API shows a connection held for
congestion with RabbitMQ's state ``flow`` (``Client.flow_held``) and one blocked by an
alarm as ``blocked``.

The owner implements ``GatedConnection``: the socket's pause and resume, ``work`` (go
on with the frames already read while ``open``, spending ``left``), and whether it owes
acks. This module knows no protocol and does no I/O: it pauses through its owner and takes its
time and callbacks from the ``Clock`` the plumbing hands in (the asyncio loop, or a
test's fake clock), so a sans-IO session (stomp/handler.py, mqtt/session.py) may own
one. It reaches the core only through the adapter port; the core calls it only through
``Publisher``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from roost.core.ports.adapter import AdapterPort, Client, Publisher, ResourceAlarms

log = logging.getLogger("roost.flow")

CONGESTION = "queue-congested"
ALARM = "resource-alarm"
TURN = "turn"
# One connection's share of a loop iteration: at ~20 us a frame about 5 ms of work
# (a few hundred 1 KiB publishes), and one socket read (uvloop reads up to 256 KiB).
FRAMES_PER_TURN = 256
TURN_BYTES = 64 * 1024
# While a congested queue holds a publisher, its queues are asked this often whether
# their consumers still make progress (a stalled queue lets its publishers go).
FLOW_CHECK_INTERVAL = 1.0  # seconds


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Callbacks on the event loop's turns (asyncio's loop is one)."""

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object: ...


class GatedConnection(Protocol):
    """What the gate needs from its connection."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def work(self) -> None:
        """Handle the frames already read while ``gate.open``; count each one off
        ``gate.left`` and call ``gate.end_turn()`` when it reaches 0."""

    def owes_acks(self) -> bool:
        """Deliveries to this connection await its acks."""

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        """Tell the client (AMQP's connection.blocked); the gate pauses it."""

    def alarm_unblocked(self) -> None: ...


class _Gone:
    """The owner of a closed gate: nothing to pause, nothing owed (and no reference kept
    to the connection, so it is freed at once instead of at the next full collection)."""

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def work(self) -> None:
        pass

    def owes_acks(self) -> bool:
        return False

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        pass

    def alarm_unblocked(self) -> None:
        pass


_GONE = _Gone()


class ReadGate:
    __slots__ = (
        "_alarm_blocked",
        "_alarms",
        "_clock",
        "_holds",
        "_owner",
        "_publishers",
        "_reasons",
        "_socket_paused",
        "_subscribed",
        "_watchdog",
        "client",
        "closed",
        "flow_held",
        "left",
        "open",
    )

    def __init__(self, owner: GatedConnection, clock: Clock) -> None:
        self._owner = owner
        self._clock = clock
        self._reasons: set[str] = set()
        self._socket_paused = False
        self.open = True  # no reason in effect: read on (the hot path's test)
        self.left = FRAMES_PER_TURN  # frames left in this turn
        self.closed = False
        # set by the owner once the connection is open: its management API state
        self.client: Client | None = None
        self._publishers: list[Publisher] = []
        self._holds = 0  # publishers held by a congested queue
        self.flow_held = False  # paused for CONGESTION
        self._watchdog: Timer | None = None
        self._subscribed: ResourceAlarms | None = None
        self._alarms: frozenset[str] = frozenset()
        self._alarm_blocked = False

    @property
    def paused(self) -> bool:
        """Input waits for some reason: heartbeats may wait unread in the socket."""
        return bool(self._reasons)

    # -- reasons ---------------------------------------------------------------------------

    def pause_for(self, reason: str) -> None:
        self._reasons.add(reason)
        self._sync()

    def resume_for(self, reason: str) -> None:
        """Withdraw a reason; when it was the last, frames already read are handled at
        the next loop iteration (never here: this may run inside another connection's
        frame, a consumer's ack that drained a queue), then the socket is read again."""
        if reason not in self._reasons:
            return
        self._reasons.discard(reason)
        if not self._reasons and not self.closed:
            self._reasons.add(TURN)
            self._clock.call_soon(self._next_turn)

    def resume_all(self) -> None:
        """Read whatever held us (a close must read its reply): flow, alarm, turn."""
        for reason in list(self._reasons):
            if reason != TURN:
                self.resume_for(reason)

    def _sync(self) -> None:
        paused = bool(self._reasons)
        self.open = not paused
        if paused != self._socket_paused and not self.closed:
            self._socket_paused = paused
            if paused:
                self._owner.pause_reading()
            else:
                self._owner.resume_reading()

    # -- turns -----------------------------------------------------------------------------

    def end_turn(self) -> None:
        """The connection did its share of this iteration: go on at the next one."""
        self.left = FRAMES_PER_TURN
        if TURN not in self._reasons and not self.closed:
            self.pause_for(TURN)
            self._clock.call_soon(self._next_turn)

    def read_done(self, size: int) -> None:
        """After a socket read of ``size`` bytes was handled: a large one ends the turn
        (libuv would read the socket again in this iteration)."""
        if size >= TURN_BYTES:
            self.end_turn()

    def _next_turn(self) -> None:
        if self.closed or TURN not in self._reasons:
            return
        self._reasons.discard(TURN)
        self.left = FRAMES_PER_TURN
        if not self._reasons:
            self.open = True
            self._owner.work()  # may end this turn too, or pause for another reason
        self._sync()

    # -- publisher flow control (core/flow.py) --------------------------------------------

    def publisher(self, broker: AdapterPort) -> Publisher:
        """A new publisher (an AMQP channel, a STOMP connection) that congested queues
        hold: while one holds it, this connection may be paused."""
        publisher = broker.new_publisher(self._held_changed)
        self._publishers.append(publisher)
        return publisher

    def drop_publisher(self, publisher: Publisher) -> None:
        """The publisher is gone (its channel closed): no queue holds it any more."""
        if publisher.held:
            self._holds -= 1
        publisher.close()
        if publisher in self._publishers:
            self._publishers.remove(publisher)
        self.update_congestion()

    @property
    def holding(self) -> bool:
        """Some publisher of this connection is held by a congested queue."""
        return self._holds > 0

    def _held_changed(self, held: bool) -> None:
        self._holds += 1 if held else -1
        if held and self._watchdog is None and not self.closed:
            self._watchdog = self._clock.call_later(FLOW_CHECK_INTERVAL, self._check_progress)
        self.update_congestion()

    def update_congestion(self) -> None:
        """Pause while a publisher is held, unless the connection owes acks. Called when
        a hold changes, after frames were handled (acks change the answer) and when a
        delivery to be acked went out while paused."""
        want = self._holds > 0 and not self.closed and not self._owner.owes_acks()
        if want == self.flow_held:
            return
        self.flow_held = want
        if self.client is not None:
            self.client.flow_held = want  # the management API's connection state
        if want:
            self.pause_for(CONGESTION)
        else:
            self.resume_for(CONGESTION)

    def _check_progress(self) -> None:
        self._watchdog = None
        if self.closed or not self._holds:
            return
        for publisher in list(self._publishers):
            if publisher.held:
                publisher.check_progress()  # a stalled queue releases it
        if self._holds:
            self._watchdog = self._clock.call_later(FLOW_CHECK_INTERVAL, self._check_progress)

    # -- resource alarms (core/alarms.py) -------------------------------------------------
    #
    # As in RabbitMQ, an alarm does not block a connection until it publishes: consumers
    # and idle connections keep going. A blocked connection's deliveries stay unacked
    # until the alarm clears or the client gives up, which requeues them.

    def watch_alarms(self, alarms: ResourceAlarms) -> None:
        """Listen to the broker's alarms from now until ``close``."""
        self._subscribed = alarms
        alarms.subscribe(self._alarms_changed)
        self._alarms_changed(alarms.active)

    def published(self) -> None:
        """After a publish: an alarm in effect blocks the connection now."""
        if self._alarms and not self._alarm_blocked and not self.closed:
            self._alarm_blocked = True
            if self.client is not None:
                self.client.alarm_state = "blocked"
            self._owner.alarm_blocked(self._alarms)
            self.pause_for(ALARM)

    def _alarms_changed(self, active: frozenset[str]) -> None:
        self._alarms = active
        if self.client is not None:
            self.client.alarm_state = (
                "" if not active else "blocked" if self._alarm_blocked else "blocking"
            )
        if not active and self._alarm_blocked:
            self._alarm_blocked = False
            if not self.closed:
                self._owner.alarm_unblocked()
            self.resume_for(ALARM)

    # -- end -------------------------------------------------------------------------------

    def release(self) -> None:
        """The connection is closing: no queue or alarm holds it any more, and it reads
        on (its peer's reply to a close must be read). Idempotent."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        publishers, self._publishers = self._publishers, []
        for publisher in publishers:
            publisher.close()
        self._holds = 0
        if self._subscribed is not None:
            self._subscribed.unsubscribe(self._alarms_changed)
            self._subscribed = None
        self._alarms = frozenset()
        self._alarm_blocked = False
        self.flow_held = False
        if self.client is not None:
            self.client.flow_held = False
        self.resume_all()

    def close(self) -> None:
        """The connection is gone: nothing refers to it any more, nothing runs for it."""
        self.release()
        self.closed = True
        self.open = False
        self._reasons.clear()
        self.client = None
        self._owner = _GONE
