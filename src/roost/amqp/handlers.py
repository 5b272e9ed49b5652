"""One open AMQP channel as a core client: each method becomes broker calls.

``AMQPChannel`` is the DeliverySink of its core Session: consuming, acks, publishing,
transactions and confirms are here; exchange and queue methods in amqp/definitions.py;
core errors become reply codes by ``ERROR_CODES`` (amqp/error_codes.py), the one table
that decides soft (channel) or hard (connection).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final, cast

from roost.amqp import codec_methods as m
from roost.amqp import definitions
from roost.amqp.channel import ConfirmTracker, Mode, TxBuffer
from roost.amqp.channel_context import ConnectionContext
from roost.amqp.codec import (
    encode_basic_deliver,
    encode_basic_get_ok,
    encode_basic_return,
    encode_method_frame,
)
from roost.amqp.error_codes import ERROR_CODES, to_amqp_error
from roost.amqp.errors import ChannelError, ConnectionError, reply_text
from roost.amqp.held import Barrier, HeldOutput
from roost.amqp.properties import PropertiesCache, encoded_properties
from roost.core import DIRECT_REPLY_TO, Message
from roost.core.errors import (
    BrokerError,
    InternalError,
    NotImplementedFeature,
    PreconditionFailed,
)

if TYPE_CHECKING:
    from roost.amqp.session import AMQPSession
    from roost.core.ports.adapter import Completion

__all__ = ["AMQPChannel", "ConnectionContext", "to_amqp_error"]


def new_consumer_tag() -> str:
    return "amq.ctag-" + base64.urlsafe_b64encode(os.urandom(16)).decode("ascii").rstrip("=")


# the channel modes as module constants: compiled, ``Mode.TX`` was two Python attribute
# lookups (the module's class, then its member) on every publish and ack
_TX: Final = Mode.TX
_CONFIRM: Final = Mode.CONFIRM


class AMQPChannel:
    def __init__(self, conn: ConnectionContext, channel_id: int) -> None:
        self.id = channel_id
        self.conn = conn
        # the same connection typed as what it is, for the per-delivery reads: compiled,
        # a field of a Protocol is a Python attribute lookup, of the class a native load
        self.wire = cast("AMQPSession", conn)
        self.broker = conn.broker
        self.client = conn.client
        self.session = self.broker.open_session(conn.client, self, number=channel_id)
        self.mode = Mode.NORMAL
        self.confirms = ConfirmTracker()
        self.tx = TxBuffer()
        self.last_queue = ""  # the spec's "last queue declared on this channel"
        self.publisher = conn.gate.publisher(self.broker)
        self.properties_cache = PropertiesCache()
        # frames wait here behind a reply that waits for the disk (amqp/held.py)
        self.output: HeldOutput = HeldOutput(conn.write)

    # -- plumbing -------------------------------------------------------------------------

    def reply(self, method: m.Method) -> None:
        self.output.send(encode_method_frame(self.id, method))

    def reply_durably(
        self,
        completion: Completion,
        method: m.Method,
        later: Callable[[], m.Method] | None = None,
    ) -> None:
        """Reply once what the method changed since ``completion`` was taken is durable
        (at once if it changed nothing durable): a durable declare-ok means the queue
        survives a crash. Later frames of the channel wait behind the reply. ``later``
        makes the reply when it goes out (figures a cluster's home node answered)."""
        barrier = self.output.hold(encode_method_frame(self.id, method))
        if not completion.then(partial(self._durable, barrier, method, later)):
            self.output.release(barrier)

    def _durable(
        self,
        barrier: Barrier,
        method: m.Method,
        later: Callable[[], m.Method] | None,
        error: BrokerError | None,
    ) -> None:
        if self.session.closed:
            return
        if error is None:
            if later is not None:
                barrier.frames[0] = encode_method_frame(self.id, later())
            self.output.release(barrier)
            return
        failure = to_amqp_error(error, method)
        if isinstance(error, InternalError) or not isinstance(failure, ChannelError):
            # never claim a definition is safe when its write failed; say why (the
            # disk, or a cluster whose etcd is out of reach)
            text = error.text if isinstance(error, InternalError) else "definitions not written"
            failure = ChannelError(m.INTERNAL_ERROR, reply_text(m.INTERNAL_ERROR, text))
        self.conn.channel_failed(self, failure)

    def handle(self, method: m.Method) -> None:
        """Run one method; core errors become AMQP errors carrying the method's ids."""
        handler = HANDLERS.get(method.INDEX)
        if handler is None:
            raise ConnectionError(
                m.COMMAND_INVALID,
                reply_text(m.COMMAND_INVALID, f"unexpected '{method.NAME}' from a client"),
                method.CLASS_ID,
                method.METHOD_ID,
            )
        try:
            handler(self, method)
        except BrokerError as exc:
            raise to_amqp_error(exc, method) from None

    def close(self) -> None:
        """The channel is gone (closed either way, or the connection died)."""
        self.tx.clear()
        self.output.clear()
        self.conn.gate.drop_publisher(self.publisher)
        self.broker.close_session(self.session)

    def flush_confirms(self) -> None:
        if self.confirms.has_output:
            for frame in self.confirms.frames(self.id):
                self.output.send(frame)

    # -- DeliverySink -----------------------------------------------------------------------

    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
    ) -> None:
        conn = self.wire
        self.output.send(
            encode_basic_deliver(
                self.id,
                consumer_tag,
                delivery_tag,
                redelivered,
                message.exchange,
                message.routing_key,
                encoded_properties(message),
                message.body,
                conn.frame_max,
            )
        )
        gate = conn.gate
        if gate.flow_held:  # a delivery to be acked: the socket must be read again
            gate.update_congestion()

    def consumer_cancelled(self, consumer_tag: str) -> None:
        if self.conn.cancel_notify:
            self.reply(m.BasicCancel(consumer_tag=consumer_tag, nowait=True))

    def close_with(self, error: BrokerError) -> None:
        """The core ends the channel (a delivery not acknowledged in time)."""
        code, _hard = ERROR_CODES.get(type(error), (m.INTERNAL_ERROR, True))
        self.conn.channel_failed(self, ChannelError(code, reply_text(code, error.text)))

    # -- channel / access -------------------------------------------------------------------

    def on_flow(self, method: m.ChannelFlow) -> None:
        self.session.set_flow(method.active)
        self.reply(m.ChannelFlowOk(active=method.active))

    def on_access_request(self, method: m.AccessRequest) -> None:
        self.reply(m.AccessRequestOk(ticket=1))

    # -- consuming --------------------------------------------------------------------------

    def on_qos(self, method: m.BasicQos) -> None:
        # prefetch_size is accepted and ignored, as the issue asks (RabbitMQ refuses it)
        self.session.set_qos(method.prefetch_count, method.global_)
        self.reply(m.BasicQosOk())

    def on_consume(self, method: m.BasicConsume) -> None:
        tag = method.consumer_tag or new_consumer_tag()
        consumer = self.broker.consume(
            self.session,
            definitions.queue_name(self, method.queue),
            tag,
            no_ack=method.no_ack,
            exclusive=method.exclusive,
            arguments=method.arguments,
        )
        if not method.nowait:
            self.reply(m.BasicConsumeOk(consumer_tag=tag))
        self.session.start(consumer)  # deliveries only after consume-ok

    def on_cancel(self, method: m.BasicCancel) -> None:
        self.session.cancel(method.consumer_tag)
        if not method.nowait:
            self.reply(m.BasicCancelOk(consumer_tag=method.consumer_tag))

    def on_get(self, method: m.BasicGet) -> None:
        name = definitions.queue_name(self, method.queue)
        completion = self.broker.durable_from_here()
        self.broker.prepare_get(self.session, name)  # a cluster's home node may answer
        barrier = self.output.hold(b"")
        if not completion.then(partial(self._get, barrier, name, method.no_ack)):
            self._get(barrier, name, method.no_ack, None)

    def _get(self, barrier: Barrier, name: str, no_ack: bool, error: BrokerError | None) -> None:
        if self.session.closed:
            return
        try:
            got = None if error is not None else self.broker.get(self.session, name, no_ack)
        except BrokerError:
            got = None  # gone since prepare_get checked it
        if got is None:
            barrier.frames[0] = encode_method_frame(self.id, m.BasicGetEmpty())
            self.output.release(barrier)
            return
        tag, entry, left = got
        message = entry.message
        assert message is not None  # Queue.take pages it in
        barrier.frames[0] = (
            encode_basic_get_ok(
                self.id,
                tag,
                entry.redelivered,
                message.exchange,
                message.routing_key,
                left,
                encoded_properties(message),
                message.body,
                self.conn.frame_max,
            )
        )
        self.output.release(barrier)

    def on_ack(self, method: m.BasicAck) -> None:
        if self.mode is _TX:
            self.tx.add(lambda: self.session.ack(method.delivery_tag, method.multiple))
        else:  # the hot path: no closure per ack
            self.session.ack(method.delivery_tag, method.multiple)

    def on_nack(self, method: m.BasicNack) -> None:
        self._settle(
            lambda: self.session.nack(method.delivery_tag, method.multiple, method.requeue)
        )

    def on_reject(self, method: m.BasicReject) -> None:
        self._settle(lambda: self.session.nack(method.delivery_tag, False, method.requeue))

    def _settle(self, op: Callable[[], None]) -> None:
        if self.mode is _TX:
            self.tx.add(op)
        else:
            op()

    def on_recover(self, method: m.BasicRecover) -> None:
        self.on_recover_async(method)
        self.reply(m.BasicRecoverOk())

    def on_recover_async(self, method: m.BasicRecover | m.BasicRecoverAsync) -> None:
        if not method.requeue:
            raise NotImplementedFeature("requeue=false")
        self.session.recover()

    # -- publishing -------------------------------------------------------------------------

    def publish(self, method: m.BasicPublish, properties: bytes, body: bytes) -> None:
        if method.immediate:
            raise ConnectionError(
                m.NOT_IMPLEMENTED,
                reply_text(m.NOT_IMPLEMENTED, "immediate=true"),
                method.CLASS_ID,
                method.METHOD_ID,
            )
        message = Message(
            method.exchange,
            method.routing_key,
            self.properties_cache.decode(properties),
            body,
            properties,
        )
        if message.properties.reply_to == DIRECT_REPLY_TO:
            try:
                message = self.broker.direct_reply_request(self.session, message)
            except BrokerError as exc:
                raise to_amqp_error(exc, method) from None
        try:
            if self.mode is _TX:
                self.broker.check_publish(self.client, method.exchange, message)
                self.tx.add(lambda: self._route(method, message))
            else:
                self._route(method, message)
        except BrokerError as exc:
            raise to_amqp_error(exc, method) from None

    def _route(self, method: m.BasicPublish, message: Message) -> None:
        seq = self.confirms.publish() if self.mode is _CONFIRM else 0
        confirm = partial(self._confirmed, seq) if seq else None
        routed = self.broker.publish(
            self.client, method.exchange, message, confirm, self.publisher, channel=self.id
        )
        if not routed and method.mandatory:
            self.client.counts.returned += 1
            self.output.send(
                encode_basic_return(
                    self.id,
                    m.NO_ROUTE,
                    "NO_ROUTE",
                    message.exchange,
                    message.routing_key,
                    encoded_properties(message),
                    message.body,
                    self.conn.frame_max,
                )
            )

    def _confirmed(self, seq: int, ok: bool) -> None:
        """The core says the message is safe (at once, or after the store's fsync)."""
        if self.session.closed:
            return  # the channel is gone; its number may already belong to a new one
        self.confirms.settle(seq, ok)
        if ok:
            self.client.counts.confirmed += 1
        self.conn.confirms_pending(self)

    # -- transactions and confirms ----------------------------------------------------------

    def on_tx_select(self, method: m.TxSelect) -> None:
        if self.mode is _CONFIRM:
            raise PreconditionFailed("cannot switch from confirm to tx mode")
        self.mode = Mode.TX
        self.session.transactional = True
        self.reply(m.TxSelectOk())

    def on_tx_commit(self, method: m.TxCommit) -> None:
        if self.mode is not _TX:
            raise PreconditionFailed("channel is not transactional")
        completion = self.broker.durable_from_here()
        for op in self.tx.take():
            op()
        if not completion.then(self._tx_committed):
            self._tx_committed(None)

    def _tx_committed(self, _error: BrokerError | None) -> None:
        """commit-ok waits, as a confirm does, for the fsync of the persistent messages."""
        if not self.session.closed:
            self.reply(m.TxCommitOk())

    def on_tx_rollback(self, method: m.TxRollback) -> None:
        if self.mode is not _TX:
            raise PreconditionFailed("channel is not transactional")
        self.tx.clear()
        self.reply(m.TxRollbackOk())

    def on_confirm_select(self, method: m.ConfirmSelect) -> None:
        if self.mode is _TX:
            raise PreconditionFailed("cannot switch from tx to confirm mode")
        self.mode = Mode.CONFIRM
        self.session.confirm = True
        self.session.unconfirmed = self.confirms.unconfirmed
        if not method.nowait:
            self.reply(m.ConfirmSelectOk())


# method index -> handler, one table for every channel (bound methods in a dict of each
# channel's own made a channel <-> dict cycle: a closed connection then waited for a
# full collection instead of going at once)
HANDLERS: dict[int, Callable[[AMQPChannel, Any], None]] = {
    m.ChannelFlow.INDEX: AMQPChannel.on_flow,
    m.AccessRequest.INDEX: AMQPChannel.on_access_request,
    **definitions.HANDLERS,
    m.BasicQos.INDEX: AMQPChannel.on_qos,
    m.BasicConsume.INDEX: AMQPChannel.on_consume,
    m.BasicCancel.INDEX: AMQPChannel.on_cancel,
    m.BasicGet.INDEX: AMQPChannel.on_get,
    m.BasicAck.INDEX: AMQPChannel.on_ack,
    m.BasicNack.INDEX: AMQPChannel.on_nack,
    m.BasicReject.INDEX: AMQPChannel.on_reject,
    m.BasicRecover.INDEX: AMQPChannel.on_recover,
    m.BasicRecoverAsync.INDEX: AMQPChannel.on_recover_async,
    m.TxSelect.INDEX: AMQPChannel.on_tx_select,
    m.TxCommit.INDEX: AMQPChannel.on_tx_commit,
    m.TxRollback.INDEX: AMQPChannel.on_tx_rollback,
    m.ConfirmSelect.INDEX: AMQPChannel.on_confirm_select,
}
