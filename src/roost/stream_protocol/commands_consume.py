"""The stream protocol's consuming commands: Subscribe (offset specifications,
filters, single active consumer with ConsumerUpdate), Credit, Unsubscribe, StoreOffset
and QueryOffset."""

from __future__ import annotations

from roost.core import BrokerError
from roost.stream_protocol import constants as c
from roost.stream_protocol import single_active
from roost.stream_protocol.commands_base import (
    CommandsBase,
    code_for,
    log,
)
from roost.stream_protocol.consumers import PREFETCH, Subscription, offset_arguments
from roost.stream_protocol.frames import (
    ConsumerUpdate,
    ConsumerUpdateResponse,
    Credit,
    CreditResponse,
    MetadataUpdate,
    OffsetSpec,
    QueryOffset,
    QueryOffsetResponse,
    StoreOffset,
    Subscribe,
    Unsubscribe,
)
from roost.stream_protocol.leader_queries import ask_offset


class ConsumeCommands(CommandsBase):
    # -- consuming ------------------------------------------------------------------------

    def _subscribe(self, f: Subscribe) -> None:
        if f.subscription_id in self.subscriptions:
            self._reply(c.SUBSCRIBE, f.correlation_id, c.SUBSCRIPTION_ID_ALREADY_EXISTS)
            return
        if not self.port.is_stream(self.client, f.stream):
            self._reply(c.SUBSCRIBE, f.correlation_id, c.STREAM_DOES_NOT_EXIST)
            return
        single = f.properties.get("single-active-consumer", "").lower() == "true"
        name = f.properties.get("name", "")
        if single and not name:  # RabbitMQ: a single active consumer needs a name
            self._reply(c.SUBSCRIBE, f.correlation_id, c.PRECONDITION_FAILED)
            return
        sub = Subscription(
            f.subscription_id,
            f.stream,
            f.credit,
            frame_max=self.s.frame_max,
            write=self.s.write,
            wake=self._wake,
            gone=self._gone,
            fail=lambda error: self.s.close_with(code_for(error), error.text),
            filter_values=frozenset(
                v for k, v in f.properties.items() if k.startswith("filter.")
            ) or None,
            match_unfiltered=f.properties.get("match-unfiltered", "").lower() == "true",
        )
        sub.spec = f.offset_spec
        if not single:
            try:
                self._start(sub, f.offset_spec)
            except BrokerError as exc:
                self._reply(c.SUBSCRIBE, f.correlation_id, code_for(exc))
                return
            self.subscriptions[f.subscription_id] = sub
            self._reply(c.SUBSCRIBE, f.correlation_id, c.OK)
            self._begin(sub)
            return
        sub.group = (self.client.vhost.name, f.stream, name)
        sub.active = False
        self.subscriptions[f.subscription_id] = sub
        self._reply(c.SUBSCRIBE, f.correlation_id, c.OK)
        single_active.join(
            self._groups, sub.group, (self, sub), self._partition(f), _activate, _deactivate
        )

    def _partition(self, f: Subscribe) -> int | None:
        """The stream's order in the super stream the Subscribe names (None: none)."""
        super_stream = f.properties.get("super-stream")
        if not super_stream:
            return None
        try:
            partitions = self.port.super_stream_partitions(self.client, super_stream)
        except BrokerError:
            return None
        return partitions.index(f.stream) if f.stream in partitions else None

    def _start(self, sub: Subscription, spec: OffsetSpec) -> None:
        """The core consumer of a subscription, from ``spec``; deliveries begin with
        ``_begin`` (after the Subscribe response is written)."""
        try:
            session = self.port.open_session(self.client, sub, number=sub.id)
            sub.session = session
            sub.whole_first_chunk = spec.type == c.OFFSET_LAST
            session.set_qos(PREFETCH, False)
            sub.consumer = self.port.consume(
                session,
                sub.stream,
                f"stream-{sub.id}",
                no_ack=False,
                exclusive=False,
                arguments={**offset_arguments(spec.type, spec.value), **sub.core_arguments()},
            )
        except BrokerError:
            if sub.session is not None:
                self.port.close_session(sub.session)
                sub.session = None
            raise

    def _begin(self, sub: Subscription) -> None:
        if sub.session is not None and sub.consumer is not None:
            sub.session.start(sub.consumer)

    # -- single active consumer -----------------------------------------------------------

    def _activate(self, sub: Subscription) -> None:
        """Tell the client this subscription is now the active one; it answers with
        the offset to start from (ConsumerUpdateResponse)."""
        self._next_update += 1
        self._updates[self._next_update] = sub
        self.s.send(ConsumerUpdate(self._next_update, sub.id, True))

    def _deactivate(self, sub: Subscription) -> None:
        """A super stream's partition moved to another member: stop reading and tell the
        client; the group activates the next member when the answer comes (it may store
        its offset first) or after ``single_active.STEP_DOWN_TIMEOUT``."""
        for correlation, waiting in list(self._updates.items()):
            if waiting is sub:  # an activation not answered yet no longer stands
                del self._updates[correlation]
        sub.active = False
        sub.drop_pending()
        if sub.session is not None:
            self.port.close_session(sub.session)
            sub.session = None
            sub.consumer = None
        self._next_update += 1
        correlation = self._next_update
        if sub.group is not None:
            timer = self.s.clock.call_later(
                single_active.STEP_DOWN_TIMEOUT, self._stepped_down, correlation
            )
            self._stepping[correlation] = (sub, sub.group, timer)
        self.s.send(ConsumerUpdate(correlation, sub.id, False))

    def _stepped_down(self, correlation: int) -> None:
        """The answer to a ConsumerUpdate (not active) came, or the wait timed out."""
        waiting = self._stepping.pop(correlation, None)
        if waiting is not None:
            sub, group, timer = waiting
            timer.cancel()
            single_active.stepped_down(self._groups, group, (self, sub), _activate, _deactivate)

    def _consumer_update_response(self, f: ConsumerUpdateResponse) -> None:
        if f.correlation_id in self._stepping:
            self._stepped_down(f.correlation_id)
            return
        sub = self._updates.pop(f.correlation_id, None)
        if sub is None or self.subscriptions.get(sub.id) is not sub or sub.session is not None:
            return
        spec = f.offset_spec if f.offset_spec.type != c.OFFSET_NONE else sub.spec
        sub.active = True
        try:
            self._start(sub, spec)
        except BrokerError as exc:
            self.s.close_with(code_for(exc), exc.text)
            return
        self._begin(sub)

    def _leave(self, sub: Subscription) -> None:
        for correlation, (waiting, _group, timer) in list(self._stepping.items()):
            if waiting is sub:  # leaving ends its step-down (the group stops waiting)
                del self._stepping[correlation]
                timer.cancel()
        if sub.group is not None:
            group, sub.group = sub.group, None
            single_active.leave(self._groups, group, (self, sub), _activate, _deactivate)

    def _wake(self, sub: Subscription) -> None:
        if self.s.gate.flow_held:  # its Credit must be read: the socket may not wait
            self.s.gate.update_congestion()
        if sub.credit > 0:
            self._waking.add(sub)
            self._schedule()

    def _gone(self, sub: Subscription) -> None:
        """The stream was deleted: RabbitMQ tells with MetadataUpdate, then the client
        resubscribes or not."""
        if self.subscriptions.pop(sub.id, None) is not None:
            self._stop(sub)
            self.s.send(MetadataUpdate(c.STREAM_NOT_AVAILABLE, sub.stream))

    def _stop(self, sub: Subscription) -> None:
        sub.drop_pending()
        if sub.session is not None:
            self.port.close_session(sub.session)
            sub.session = None
        self._leave(sub)

    def _credit(self, f: Credit) -> None:
        sub = self.subscriptions.get(f.subscription_id)
        if sub is None:
            self.s.send(CreditResponse(c.SUBSCRIPTION_ID_DOES_NOT_EXIST, f.subscription_id))
            return
        sub.credit += f.credit
        sub.flush()

    def _unsubscribe(self, f: Unsubscribe) -> None:
        sub = self.subscriptions.pop(f.subscription_id, None)
        if sub is None:
            self._reply(c.UNSUBSCRIBE, f.correlation_id, c.SUBSCRIPTION_ID_DOES_NOT_EXIST)
            return
        self._stop(sub)
        self._reply(c.UNSUBSCRIBE, f.correlation_id, c.OK)

    def _store_offset(self, f: StoreOffset) -> None:
        try:  # no response in the protocol: a refusal is only logged, as RabbitMQ does
            self.port.store_stream_offset(self.client, f.stream, f.reference, f.offset)
        except BrokerError as exc:
            log.info("%s: StoreOffset on '%s' refused: %s", self.s.transport.peer, f.stream, exc)

    def _query_offset(self, f: QueryOffset) -> None:
        if ask_offset(self, f):  # no copy here: its leader answers
            return
        try:
            stored = self.port.stream_offset(self.client, f.stream, f.reference)
        except BrokerError as exc:
            self.s.send(QueryOffsetResponse(f.correlation_id, code_for(exc), 0))
            return
        code = c.NO_OFFSET if stored is None else c.OK
        self.s.send(QueryOffsetResponse(f.correlation_id, code, stored or 0))


def _activate(member: tuple[ConsumeCommands, Subscription]) -> None:
    member[0]._activate(member[1])


def _deactivate(member: tuple[ConsumeCommands, Subscription]) -> None:
    member[0]._deactivate(member[1])
