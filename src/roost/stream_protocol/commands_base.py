"""What every group of the stream protocol's commands shares (commands.py has the
handlers): the session and port, the publishers and subscriptions, the confirms and
chunks gathered for one turn of the loop, and the response code for a core error."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from roost.core import (
    AccessRefused,
    BrokerError,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
)
from roost.stream_protocol import constants as c
from roost.stream_protocol import single_active
from roost.stream_protocol.consumers import Subscription
from roost.stream_protocol.frames import (
    PublishConfirm,
    PublishedMessage,
    PublishError,
    Response,
)
from roost.stream_protocol.publishers import Publisher

# a reason for the gate to stay shut: more than max_unconfirmed publishes await confirms
UNCONFIRMED = "unconfirmed"

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client
    from roost.stream_protocol.session import StreamSession
    from roost.stream_protocol.settings import Timer

log = logging.getLogger("roost.stream_protocol")

# an offset specification's type as the stream queue names where a consumer starts
_SPEC_KINDS = {
    c.OFFSET_FIRST: "first",
    c.OFFSET_LAST: "last",
    c.OFFSET_NEXT: "next",
    c.OFFSET_OFFSET: "offset",
    c.OFFSET_TIMESTAMP: "timestamp",
}

# Create's arguments RabbitMQ takes as numbers (the frame carries strings)
_INT_ARGUMENTS = ("x-max-length-bytes", "x-stream-max-segment-size-bytes")


def code_for(error: BrokerError) -> int:
    if isinstance(error, AccessRefused):
        return c.ACCESS_REFUSED
    if isinstance(error, NotFound):
        return c.STREAM_DOES_NOT_EXIST
    if isinstance(error, PreconditionFailed | ResourceLocked):
        return c.PRECONDITION_FAILED
    return c.INTERNAL_ERROR



class CommandsBase:
    def __init__(self, session: StreamSession) -> None:
        self.s = session
        self.port = session.port
        self.publishers: dict[int, Publisher] = {}
        self.subscriptions: dict[int, Subscription] = {}
        self._watching: dict[str, Callable[[], None]] = {}  # stream -> unwatch (publishers)
        self._unconfirmed = 0
        # Publish frames gathered this turn (commands_publish.py: MERGE_MESSAGES)
        self._pending: list[PublishedMessage] = []
        self._pending_publisher: Publisher | None = None
        self._pending_bytes = 0
        # or gathered as decoded entries (Publish.entries): their parts, their ids
        self._pending_entries: list[bytes] = []
        self._pending_ids: list[range] = []
        self._pending_count = 0
        self._confirms: dict[int, list[int]] = {}
        self._errors: dict[int, list[tuple[int, int]]] = {}
        self._flush_due = False
        self._waking: set[Subscription] = set()
        self._held_publisher = session.gate.publisher(self.port)  # congested queues hold it
        self._groups = single_active.groups_of(self.port)
        self._updates: dict[int, Subscription] = {}  # ConsumerUpdate sent, not answered
        self._next_update = 0
        # ConsumerUpdate (not active) sent: the group that waits for the answer, its timer
        self._stepping: dict[int, tuple[Subscription, tuple[str, str, str], Timer]] = {}

    @property
    def client(self) -> Client:
        assert self.s.client is not None
        return self.s.client

    def _reply(self, key: int, correlation_id: int, code: int) -> None:
        self.s.send(Response(key, correlation_id, code))

    def _durably(self, key: int, correlation_id: int, change: Callable[[], None]) -> None:
        """Make a definition change, and answer once it is durable (or with its error)."""
        completion = self.port.durable_from_here()
        try:
            change()
        except BrokerError as exc:
            self._reply(key, correlation_id, code_for(exc))
            return
        def reply_when(error: BaseException | None) -> None:
            code = c.OK
            if error is not None:
                code = code_for(error) if isinstance(error, BrokerError) else c.INTERNAL_ERROR
            self._reply(key, correlation_id, code)

        pending: list[BaseException | None] = [None]
        finish = self.s.hold_until(lambda: reply_when(pending[0]))

        def done(error: BrokerError | None) -> None:
            pending[0] = error
            finish(error)

        if not completion.then(done):
            finish(None)

    # -- one turn of the loop: confirms and chunks ----------------------------------------

    def _schedule(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            self.s.clock.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_due = False
        if self.s.client is None:
            return
        for pid, ids in self._confirms.items():
            self.s.send(PublishConfirm(pid, ids))
        self._confirms = {}
        for pid, errors in self._errors.items():
            self.s.send(PublishError(pid, errors))
        self._errors = {}
        waking, self._waking = self._waking, set()
        for sub in waking:
            sub.flush()
        settings = self.s.settings
        if self._unconfirmed <= settings.max_unconfirmed - settings.unblock_credits:
            self.s.gate.resume_for(UNCONFIRMED)

