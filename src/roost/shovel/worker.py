"""One shovel: connect to a source and a destination, consume, publish, ack, and start
again after ``reconnect-delay`` when either side fails.

At-least-once with ``on-confirm``: a source message is acked only when the destination
confirmed it; anything unacked when a connection fails is redelivered by the source
broker once the shovel's source connection is gone (closed here whenever either side
fails), so it may arrive twice, never not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from roost.amqp.codec_methods import BasicProperties
from roost.client import Channel, ChannelClosed, Connection, Endpoint, Message, connect
from roost.shovel.spec import ShovelSpec, local_endpoint, masked

log = logging.getLogger("roost.shovel")


@dataclass
class Status:
    state: str = "starting"  # starting, running, terminated
    reason: str = ""  # why it terminated
    since: float = 0.0  # time.time() of the last change


class Worker:
    """A shovel's task and its status. ``finished(vhost, name)`` hears that it moved
    what ``src-delete-after`` asked for (the runtime then clears its parameter)."""

    def __init__(
        self, vhost: str, name: str, spec: ShovelSpec, *, local_port: int, node: str,
        finished: Callable[[str, str], None], kind: str = "dynamic",
        may_run: Callable[[], bool] | None = None,
    ) -> None:
        self.kind = kind
        # in a cluster: does this node still own the shovel (read before each message is
        # moved, so a node fenced off from etcd moves nothing more, even before its
        # worker is stopped)
        self.may_run = may_run or (lambda: True)  # "static": from the config file, not a parameter
        self.vhost, self.name, self.spec = vhost, name, spec
        self.local_port, self.node, self._finished = local_port, node, finished
        self.status = Status(since=time.time())
        self.moved = 0  # messages acked at the source (or published, for no-ack)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _set(self, state: str, reason: str = "") -> None:
        self.status = Status(state, reason, time.time())

    def row(self) -> dict[str, Any]:
        """The shovel as RabbitMQ's ``/api/shovels`` lists it."""
        spec, st = self.spec, self.status
        row: dict[str, Any] = {
            "node": self.node,
            "timestamp": _timestamp(st.since),
            "name": self.name,
            "vhost": self.vhost,
            "type": self.kind,
            "state": st.state,
        }
        if st.state == "terminated":
            row["reason"] = st.reason
        if st.state == "running":
            row.update({
                "src_uri": masked(self._connected[0]), "dest_uri": masked(self._connected[1]),
                "src_protocol": "amqp091", "dest_protocol": "amqp091",
            })
            row.update({k.replace("-", "_"): v for k, v in spec.source_endpoint_names().items()})
        return row

    # -- the loop --------------------------------------------------------------------------

    _connected: tuple[str, str] = ("", "")

    async def _run(self) -> None:
        while True:
            self._set("starting")
            conns: list[Connection] = []
            try:
                if await self._once(conns):
                    self._set("terminated", "completed: src-delete-after reached")
                    self._finished(self.vhost, self.name)
                    return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._set("terminated", str(exc) or type(exc).__name__)
                log.warning("shovel '%s' in vhost '%s' failed: %s", self.name, self.vhost,
                            self.status.reason)
            finally:
                for conn in conns:  # the source's unacked messages go back to its queue
                    if conn.transport is not None and not conn.transport.is_closing():
                        conn.transport.abort()
            if self.spec.reconnect_delay <= 0:  # RabbitMQ's rule: 0 means no restart
                return
            await asyncio.sleep(self.spec.reconnect_delay)

    async def _connect(self, uris: tuple[str, ...], side: str) -> tuple[Connection, str]:
        picked = list(uris)
        random.shuffle(picked)  # as RabbitMQ: one of the URIs, at random
        endpoints: list[Endpoint] = [local_endpoint(u, self.local_port) for u in picked]
        # heartbeats as RabbitMQ's Erlang client asks (10 s) unless the URI says: a peer
        # cut off without a reset is noticed, and the shovel starts again
        conn = await connect(endpoints, name=f"Shovel {self.name} ({side})", heartbeat=10)
        return conn, picked[[str(e) for e in endpoints].index(str(conn.endpoint))]

    async def _once(self, conns: list[Connection]) -> bool:
        """One life of the shovel; True when src-delete-after is reached."""
        spec = self.spec
        src, src_uri = await self._connect(spec.src_uris, "source")
        conns.append(src)
        dest, dest_uri = await self._connect(spec.dest_uris, "destination")
        conns.append(dest)
        self._connected = (src_uri, dest_uri)
        sch, dch = await src.channel(), await dest.channel()
        if spec.ack_mode == "on-confirm":
            await dch.confirm_select()
        queue = spec.src_queue
        if queue is not None:
            await _ensure_queue(src, queue)
        if spec.dest_queue is not None:
            await _ensure_queue(dest, spec.dest_queue)
        if queue is None:  # a server-named queue of our own, bound as asked
            queue = (await sch.queue_declare("", exclusive=True)).queue
            await sch.queue_bind(queue, spec.src_exchange or "", spec.src_exchange_key)
        remaining: int | None = None
        if spec.delete_after == "queue-length":
            remaining = (await sch.queue_declare(queue, passive=True)).message_count
        elif isinstance(spec.delete_after, int):
            remaining = spec.delete_after - self.moved
        if remaining is not None and remaining <= 0:
            await src.close()
            await dest.close()
            return True
        no_ack = spec.ack_mode == "no-ack"
        if not no_ack:
            await sch.qos(min(spec.prefetch_count, remaining or spec.prefetch_count))
        done: asyncio.Future[None] = src.loop.create_future()
        mover = _Mover(self, sch, dch, remaining, done)
        await sch.consume(queue, mover.on_message, no_ack=no_ack,
                          on_cancel=lambda _tag: mover.fail("the source queue was deleted"))
        self._set("running")
        log.info("shovel '%s' in vhost '%s' running", self.name, self.vhost)
        # the futures themselves, never a task awaiting them: cancelling such a task
        # would cancel the connection's own ``closed``. The client offers no future for a
        # channel the broker closed (a missing exchange, a refused ack): checked each second
        ends = [done, src.closed, dest.closed]
        while not any(f.done() for f in ends) and sch.error is None and dch.error is None:
            await asyncio.wait(ends, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
        if not done.done():
            why = sch.error or dch.error or src.error or dest.error or "a connection closed"
            raise ConnectionError(str(why))
        done.result()  # a failure the mover saw
        await src.close()  # gracefully: the last acks must reach the source
        await dest.close()
        return True


async def _ensure_queue(conn: Connection, queue: str) -> None:
    """A named source or destination queue that is missing is declared durable, as
    RabbitMQ's dynamic shovels do; one that exists is left as it is."""
    ch = await conn.channel()
    try:
        await ch.queue_declare(queue, passive=True)
    except ChannelClosed as exc:
        if exc.reply_code != 404:
            raise
        ch = await conn.channel()
        await ch.queue_declare(queue, durable=True)
    await ch.close()


def _timestamp(when: float) -> str:
    """RabbitMQ 3.10's form: local time, the hour not padded (``2026-11-27 8:50:09``)."""
    t = datetime.fromtimestamp(when)
    return f"{t.year}-{t.month:02}-{t.day:02} {t.hour}:{t.minute:02}:{t.second:02}"


class _Mover:
    """The consume callback: publish each delivery to the destination, then ack it at
    the source as ``ack-mode`` says."""

    def __init__(self, worker: Worker, sch: Channel, dch: Channel, remaining: int | None,
                 done: asyncio.Future[None]) -> None:
        self.worker, self.sch, self.dch, self.done = worker, sch, dch, done
        self.remaining = remaining  # deliveries still to take; None: no end
        self.pending = 0  # published, not yet settled at the source
        spec = worker.spec
        self.exchange = spec.dest_exchange if spec.dest_queue is None else ""
        self.headers: dict[str, Any] = {
            "shovelled-by": worker.node, "shovel-type": worker.kind,
            "shovel-name": worker.name, "shovel-vhost": worker.vhost,
            **spec.source_endpoint_names(),
        }

    def fail(self, reason: str) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(reason))

    def on_message(self, msg: Message) -> None:
        if self.done.done() or not self.worker.may_run():
            return  # past the end, or fenced: left unacked, requeued when the connection closes
        if self.remaining is not None:
            if self.remaining <= 0:
                return
            self.remaining -= 1
        spec, worker = self.worker.spec, self.worker
        key = spec.dest_queue if spec.dest_queue is not None else (
            msg.routing_key if spec.dest_exchange_key is None else spec.dest_exchange_key)
        try:
            confirmed = self.dch.publish(self.exchange or "", key, msg.body,
                                         self._properties(msg))
        except Exception as exc:
            self.fail(f"publishing to the destination failed: {exc}")
            return
        tag = msg.delivery_tag
        if spec.ack_mode == "on-confirm" and confirmed is not None:
            self.pending += 1
            confirmed.add_done_callback(lambda fut: self._settled(tag, fut))
            return
        if spec.ack_mode == "on-publish":
            self.sch.ack(tag)
        worker.moved += 1
        self._maybe_done()

    def _settled(self, tag: int, fut: asyncio.Future[bool]) -> None:
        self.pending -= 1
        if fut.cancelled() or fut.exception() is not None:
            # the destination's channel or connection ended: the source redelivers it
            self.fail(f"the destination failed: {self.dch.error or fut.exception()}")
            return
        if self.sch.error is not None:
            return
        if fut.result():
            self.sch.ack(tag)
            self.worker.moved += 1
        else:  # refused by the destination: back to the source queue, as RabbitMQ does
            self.sch.nack(tag, requeue=True)
        self._maybe_done()

    def _maybe_done(self) -> None:
        if self.remaining == 0 and self.pending == 0 and not self.done.done():
            self.done.set_result(None)

    def _properties(self, msg: Message) -> BasicProperties:
        props = msg.properties
        spec = self.worker.spec
        overrides = dict(spec.publish_properties)
        if not (spec.add_forward_headers or spec.add_timestamp_header or overrides):
            return props
        fields = {n: getattr(props, n) for n in BasicProperties.NAMES}
        fields.update(overrides)
        headers = dict(fields.get("headers") or {})
        if spec.add_forward_headers:
            src_uri, dest_uri = self.worker._connected
            entry = {**self.headers, "src-uri": masked(src_uri), "dest-uri": masked(dest_uri)}
            headers["x-shovelled"] = [*headers.get("x-shovelled", []), entry]
        if spec.add_timestamp_header:
            headers["x-shovelled-timestamp"] = int(time.time())
        fields["headers"] = headers or None
        return BasicProperties(**fields)
