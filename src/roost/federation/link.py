"""One federation link: a downstream exchange or queue of this node and one upstream.

Both kinds connect to the upstream and to this node with ``roost.client`` and start
again after the upstream's ``reconnect-delay`` when either side fails (status ``error``
with the reason meanwhile, as RabbitMQ's ``/api/federation-links`` shows it).

- ``ExchangeLink``: declares a queue on the upstream, binds it to the upstream exchange
  as the downstream exchange is bound (following every binding change: the federation
  runtime pokes the link when a binding of its exchange changes), and publishes
  what arrives into the downstream exchange with an ``x-received-from`` entry. A
  message that already passed ``max-hops`` brokers, or this one, is dropped.
- ``QueueLink``: consumes from the upstream queue only while the downstream queue has
  consumers and no ready message for them, and puts what it takes into the downstream
  queue.

With ``ack-mode: on-confirm`` (the default) the upstream message is acked only once
this node confirmed it, so a failure on either side loses nothing (at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from roost.amqp.codec_methods import BasicProperties
from roost.client import Channel, ChannelClosed, Connection, Message, connect
from roost.federation.spec import Upstream
from roost.shovel.spec import local_endpoint, masked
from roost.shovel.worker import _timestamp

if TYPE_CHECKING:
    from roost.core.ports.management import DefinitionQueries

log = logging.getLogger("roost.federation")
# seconds between looks at a federated queue's consumers and ready count: no event tells
# of those (they change with every delivery), so queue links alone still look
DEMAND_POLL = 0.1


@dataclass(frozen=True)
class Where:
    """What a link needs of its node: its AMQP port, its name, and the read side of the
    management port (bindings, queue counts)."""

    local_port: int
    cluster: str  # this node's name in x-received-from, for loop detection
    node: str
    queries: DefinitionQueries


class Link:
    kind = ""

    def __init__(self, vhost: str, resource: str, upstream: Upstream, where: Where) -> None:
        self.vhost, self.resource, self.upstream, self.where = vhost, resource, upstream, where
        self.status, self.error, self.since = "starting", "", time.time()
        self.uri = ""
        self.local_name = f"Federation link (upstream: {upstream.name}, policy)"
        self.id = hashlib.sha1(
            f"{vhost}|{self.kind}|{resource}|{upstream.name}".encode()
        ).hexdigest()[:8]
        self.moved = 0
        self._task: asyncio.Task[None] | None = None
        self._poked = asyncio.Event()

    def poke(self) -> None:
        """Something the link follows changed (a binding of its exchange), or one of
        its channels or connections ended: the link looks again now."""
        self._poked.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _set(self, status: str, error: str = "") -> None:
        self.status, self.error, self.since = status, error, time.time()

    def row(self) -> dict[str, Any]:
        """The link as RabbitMQ 3.10's ``/api/federation-links`` lists it."""
        up = self.upstream
        row: dict[str, Any] = {
            "node": self.where.node,
            "type": self.kind,
            "vhost": self.vhost,
            "upstream": up.name,
            "id": self.id,
            "status": self.status,
            "timestamp": _timestamp(self.since),
        }
        if self.kind == "exchange":
            row.update(exchange=self.resource, upstream_exchange=up.exchange or self.resource)
        else:
            row.update(
                queue=self.resource,
                upstream_queue=up.queue or self.resource,
                consumer_tag=self.consumer_tag(),
            )
        if self.status == "running":
            row["local_connection"] = self.local_name
        if self.status == "error":
            row["error"] = self.error
        row["uri"] = masked(self.uri or up.uris[0])  # RabbitMQ shows it in errors too
        return row

    async def _run(self) -> None:
        while True:
            self._set("starting")
            conns: list[Connection] = []
            try:
                await self._once(conns)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._set("error", str(exc) or type(exc).__name__)
                log.warning(
                    "federation link %s '%s' from upstream '%s' failed: %s",
                    self.kind,
                    self.resource,
                    self.upstream.name,
                    self.error,
                )
            finally:
                for conn in conns:  # the upstream's unacked messages go back to its queue
                    if conn.transport is not None and not conn.transport.is_closing():
                        conn.transport.abort()
            if self.upstream.reconnect_delay <= 0:
                return
            await asyncio.sleep(self.upstream.reconnect_delay)

    async def _connect(self, conns: list[Connection]) -> tuple[Connection, Connection]:
        uris = list(self.upstream.uris)
        random.shuffle(uris)  # as RabbitMQ: one of the URIs, at random
        endpoints = [local_endpoint(u, self.where.local_port) for u in uris]
        up = await connect(endpoints, name=self.local_name, heartbeat=10)
        conns.append(up)
        self.uri = uris[[str(e) for e in endpoints].index(str(up.endpoint))]
        local = await connect(
            local_endpoint(f"amqp:///{quote(self.vhost, safe='')}", self.where.local_port),
            name=self.local_name,
            heartbeat=10,
        )
        conns.append(local)
        return up, local

    async def _once(self, conns: list[Connection]) -> None:
        raise NotImplementedError

    def consumer_tag(self) -> str:
        """The link's consumer tag upstream: RabbitMQ's ``federation-link-UPSTREAM``."""
        return self.upstream.consumer_tag or f"federation-link-{self.upstream.name}"

    async def _watch(
        self, chans: list[Channel], conns: list[Connection], each: Any, every: float | None
    ) -> None:
        """Call ``each()`` when poked (or every ``every`` seconds, if given) until a
        channel or connection ends, which pokes too."""
        for ch in chans:
            ch.on_end = lambda _exc: self.poke()
        for conn in conns:
            conn.closed.add_done_callback(lambda _fut: self.poke())
        while True:
            for ch in chans:
                if ch.error is not None:
                    raise ConnectionError(str(ch.error))
            for conn in conns:
                if conn.closed.done():
                    raise ConnectionError(str(conn.error or "a connection closed"))
            await each()
            if every is None:
                await self._poked.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._poked.wait(), every)
            self._poked.clear()


class _Forwarder:
    """Publish a delivery downstream and settle it upstream as ``ack-mode`` says."""

    def __init__(self, link: Link, uch: Channel, lch: Channel, exchange: str) -> None:
        self.link, self.uch, self.lch, self.exchange = link, uch, lch, exchange

    def forward(self, msg: Message, key: str, props: BasicProperties) -> None:
        mode = self.link.upstream.ack_mode
        confirmed = self.lch.publish(self.exchange, key, msg.body, props)
        tag = msg.delivery_tag
        if mode == "on-confirm" and confirmed is not None:
            confirmed.add_done_callback(lambda fut: self._settled(tag, fut))
            return
        if mode == "on-publish":
            self.uch.ack(tag)
        self.link.moved += 1

    def drop(self, msg: Message) -> None:
        if self.link.upstream.ack_mode != "no-ack":
            self.uch.ack(msg.delivery_tag)

    def _settled(self, tag: int, fut: asyncio.Future[bool]) -> None:
        if fut.cancelled() or fut.exception() is not None or self.uch.error is not None:
            return  # the link restarts; the upstream redelivers it
        if fut.result():
            self.uch.ack(tag)
            self.link.moved += 1
        else:
            self.uch.nack(tag, requeue=True)


def _with_headers(props: BasicProperties, headers: dict[str, Any]) -> BasicProperties:
    fields = {n: getattr(props, n) for n in BasicProperties.NAMES}
    fields["headers"] = headers
    return BasicProperties(**fields)


def _binding_key(routing_key: str, arguments: dict[str, Any]) -> tuple[str, str]:
    return routing_key, json.dumps(arguments, sort_keys=True, default=str)


class ExchangeLink(Link):
    kind = "exchange"

    def queue_name(self) -> str:
        """The upstream queue, named as RabbitMQ 3.10 names it."""
        ux = self.upstream.exchange or self.resource
        return f"federation: {ux} -> {self.where.cluster}:{self.resource}"

    async def _once(self, conns: list[Connection]) -> None:
        up, local = await self._connect(conns)
        uch, lch = await up.channel(), await local.channel()
        upstream = self.upstream
        if upstream.ack_mode == "on-confirm":
            await lch.confirm_select()
        ux = upstream.exchange or self.resource
        await uch.exchange_declare(ux, passive=True)  # 404 when the upstream lacks it
        args: dict[str, Any] = {}
        if upstream.expires is not None:
            args["x-expires"] = upstream.expires
        if upstream.message_ttl is not None:
            args["x-message-ttl"] = upstream.message_ttl
        queue = self.queue_name()
        await uch.queue_declare(queue, durable=True, arguments=args)
        bound: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}

        async def follow_bindings() -> None:
            want = {
                _binding_key(b.routing_key, b.arguments): (b.routing_key, b.arguments)
                for b in self.where.queries.list_bindings(self.vhost, source=self.resource)
            }
            for key in [k for k in bound if k not in want]:
                rk, bargs = bound.pop(key)
                await uch.queue_unbind(queue, ux, rk, bargs)
            for key, (rk, bargs) in want.items():
                if key not in bound:
                    await uch.queue_bind(queue, ux, rk, bargs)
                    bound[key] = (rk, bargs)

        await follow_bindings()
        no_ack = upstream.ack_mode == "no-ack"
        if not no_ack:
            await uch.qos(upstream.prefetch_count)
        fwd = _Forwarder(self, uch, lch, self.resource)
        upstream_name = up.amqp.server_properties.get("cluster_name", "")
        if isinstance(upstream_name, bytes):
            upstream_name = upstream_name.decode()
        cluster = self.where.cluster

        def on_message(msg: Message) -> None:
            headers = dict(msg.properties.headers or {})
            seen = headers.get("x-received-from")
            seen = list(seen) if isinstance(seen, list) else []
            names = [e.get("cluster-name") for e in seen if isinstance(e, dict)]
            # an upstream announcing this node's own name (two nodes of one host with
            # default names) makes names useless for loops: max-hops alone applies then
            if len(seen) >= upstream.max_hops or (cluster in names and upstream_name != cluster):
                fwd.drop(msg)  # went far enough, or came round a loop back here
                return
            headers["x-received-from"] = [
                *seen,
                {
                    "uri": masked(self.uri),
                    "exchange": ux,
                    "redelivered": msg.redelivered,
                    "cluster-name": upstream_name,
                },
            ]
            fwd.forward(msg, msg.routing_key, _with_headers(msg.properties, headers))

        await uch.consume(queue, on_message, no_ack=no_ack, consumer_tag=self.consumer_tag())
        self._set("running")
        await self._watch([uch, lch], conns, follow_bindings, None)


class QueueLink(Link):
    kind = "queue"

    async def _once(self, conns: list[Connection]) -> None:
        up, local = await self._connect(conns)
        uch, lch = await up.channel(), await local.channel()
        upstream = self.upstream
        if upstream.ack_mode == "on-confirm":
            await lch.confirm_select()
        uq = upstream.queue or self.resource
        try:
            await uch.queue_declare(uq, passive=True)
        except ChannelClosed as exc:  # RabbitMQ declares a missing upstream queue
            if exc.reply_code != 404:
                raise
            uch = await up.channel()
            await uch.queue_declare(uq, durable=True)
        no_ack = upstream.ack_mode == "no-ack"
        if not no_ack:
            await uch.qos(upstream.prefetch_count)
        fwd = _Forwarder(self, uch, lch, "")
        tag: str | None = None

        def on_message(msg: Message) -> None:
            fwd.forward(msg, self.resource, msg.properties)

        async def follow_demand() -> None:
            nonlocal tag
            info = self.where.queries.queue_info(self.vhost, self.resource)
            hungry = info.consumers > 0 and info.messages.ready == 0
            if hungry and tag is None:
                # below local consumers at the upstream (RabbitMQ's priority for it too)
                tag = await uch.consume(
                    uq,
                    on_message,
                    no_ack=no_ack,
                    arguments={"x-priority": -1},
                    consumer_tag=self.consumer_tag(),
                )
            elif not hungry and tag is not None:
                await uch.cancel(tag)
                tag = None

        self._set("running")
        await self._watch([uch, lch], conns, follow_demand, DEMAND_POLL)
