"""Prometheus metrics as RabbitMQ's ``rabbitmq_prometheus`` plugin serves them, on
``--prometheus-port`` (15692) and, as before, on the management port.

``/metrics`` is aggregated: one series per metric (or per protocol, for the global
counters), as RabbitMQ's default registry; ``/metrics/per-object`` labels queue,
connection and channel series with ``vhost``/``queue``/``connection``/``channel``, as
RabbitMQ's per-object registry. Keeping the two apart means a ``sum()`` never adds a
total to its own parts. Every series RabbitMQ's Grafana dashboards query is here
(docs/metrics/rabbitmq-dashboards.txt; tests/http/test_prometheus.py holds us to it).
What Roost does not have is exported as RabbitMQ exports an idle one: the stream
protocol's error counters are zeros, and a single-node quorum queue's "Raft" log is its
own command count (every enqueue and settlement is one entry, committed as it is
written). No authentication, as in RabbitMQ.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from roost.core.info import OverviewInfo, ProtocolTotals, QueueInfo
from roost.core.ports.management import ManagementPort
from roost.http.exposition import CONTENT_TYPE, Exposition, Labels
from roost.http.keys import PORT
from roost.http.metrics_node import _latency, _mutators, _node, _peers, _store, identity

# rabbitmq_message_size_bytes' bounds as RabbitMQ labels them (core.client.SIZE_BOUNDS)
SIZE_LE = ("100.0", "1000.0", "10000.0", "100000.0", "1e+06", "1e+07", "5e+07", "1e+08")
STREAM_ERRORS = (
    "stream_does_not_exist", "subscription_id_already_exists",
    "subscription_id_does_not_exist", "stream_already_exists", "stream_not_available",
    "sasl_mechanism_not_supported", "authentication_failure", "sasl_error",
    "sasl_challenge", "sasl_authentication_failure_loopback", "vhost_access_failure",
    "unknown_frame", "frame_too_large", "internal_error", "access_refused",
    "precondition_failed", "publisher_does_not_exist",
)  # fmt: skip
QUEUE_GAUGES = (
    ("rabbitmq_queue_messages_ready", "Messages ready to be delivered to consumers"),
    ("rabbitmq_queue_messages_unacked", "Messages delivered and not yet acknowledged"),
    ("rabbitmq_queue_messages", "Ready plus unacknowledged messages"),
    ("rabbitmq_queue_messages_ready_bytes", "Size of ready message bodies in bytes"),
    ("rabbitmq_queue_consumers", "Consumers on the queue"),
)
QUEUE_COUNTERS = (
    ("rabbitmq_queue_messages_published_total", "Messages published into the queue"),
    ("rabbitmq_queue_messages_delivered_total", "Messages delivered or fetched from the queue"),
    ("rabbitmq_queue_messages_acked_total", "Messages acknowledged"),
    ("rabbitmq_queue_messages_redelivered_total", "Messages delivered again after a requeue"),
)


def render(port: ManagementPort, *, per_object: bool) -> str:
    out = Exposition()
    activity = port.activity
    overview = activity.overview()
    # a cluster's queues are counted by their home node, as each RabbitMQ node reports
    # the queues it hosts (summing every node's series counts each queue once)
    queues = [q for q in port.queries.list_queues() if not q.node]
    _queues(out, queues, per_object)
    _objects(out, overview, port, per_object)
    _global(out, activity.protocol_totals(), overview)
    _dead_lettered(out, activity.dead_lettered())
    _raft(out, queues, port, per_object)
    _streams(out, queues, per_object)
    _connections(out, port, overview, per_object)
    _node(out, overview)
    identity(out, overview, "per-object" if per_object else "default")
    _peers(out, activity)
    _store(out, port)
    _latency(out, activity.latency())
    _mutators(out, activity.mutator_totals())
    return out.text()


def _queues(out: Exposition, queues: list[QueueInfo], per_object: bool) -> None:
    def per_queue(values: Sequence[float]) -> list[tuple[Labels, float]]:
        if per_object:
            return [
                ({"vhost": q.vhost, "queue": q.name}, v)
                for q, v in zip(queues, values, strict=True)
            ]
        return [({}, sum(values))]

    gauges = (
        [q.messages.ready for q in queues],
        [q.messages.unacknowledged for q in queues],
        [q.messages.total for q in queues],
        [q.messages.bytes_ready for q in queues],
        [q.consumers for q in queues],
    )
    for (name, help_text), values in zip(QUEUE_GAUGES, gauges, strict=True):
        out.metric(name, "gauge", help_text, per_queue(values))
    counters = (
        [q.published for q in queues],
        [q.delivered for q in queues],
        [q.acked for q in queues],
        [q.redelivered for q in queues],
    )
    for (name, help_text), values in zip(QUEUE_COUNTERS, counters, strict=True):
        out.metric(name, "counter", help_text, per_queue(values))


def _objects(
    out: Exposition, overview: OverviewInfo, port: ManagementPort, per_object: bool
) -> None:
    churn, objects = overview.churn, overview.object_totals
    out.one("rabbitmq_queues", "gauge", "Queues", objects["queues"])
    out.one("rabbitmq_connections", "gauge", "Open connections", objects["connections"])
    out.one("rabbitmq_channels", "gauge", "Open channels", objects["channels"])
    out.one("rabbitmq_consumers", "gauge", "Consumers", objects["consumers"])
    channels = port.activity.list_channels()
    if per_object:
        consumers = [
            ({"channel": c.name, "vhost": c.vhost}, float(c.consumer_count)) for c in channels
        ]
    else:
        consumers = [({}, float(sum(c.consumer_count for c in channels)))]
    out.metric("rabbitmq_channel_consumers", "gauge", "Consumers on a channel", consumers)
    for name, help_text, value in (
        ("rabbitmq_connections_opened_total", "Connections opened", churn.connection_created),
        ("rabbitmq_connections_closed_total", "Connections closed", churn.connection_closed),
        ("rabbitmq_channels_opened_total", "Channels opened", churn.channel_created),
        ("rabbitmq_channels_closed_total", "Channels closed", churn.channel_closed),
        ("rabbitmq_queues_declared_total", "Queues declared", churn.queue_declared),
        ("rabbitmq_queues_created_total", "Queues created", churn.queue_created),
        ("rabbitmq_queues_deleted_total", "Queues deleted", churn.queue_deleted),
    ):
        out.one(name, "counter", help_text, value)


GLOBAL_COUNTERS = (
    ("received", "Messages received from publishers"),
    ("received_confirm", "Messages received from publishers in confirm mode"),
    ("routed", "Messages routed to at least one queue"),
    ("unroutable_dropped", "Messages routed nowhere and dropped"),
    ("unroutable_returned", "Messages routed nowhere and returned to a mandatory publisher"),
    ("confirmed", "Messages confirmed to publishers"),
    ("delivered", "Messages delivered to consumers or fetched"),
    ("delivered_consume_auto_ack", "Messages delivered to consumers without acks"),
    ("delivered_consume_manual_ack", "Messages delivered to consumers with acks"),
    ("delivered_get_auto_ack", "Messages fetched with basic.get without acks"),
    ("delivered_get_manual_ack", "Messages fetched with basic.get with acks"),
    ("get_empty", "basic.get operations that found the queue empty"),
)


def _global_values(t: ProtocolTotals) -> dict[str, int]:
    delivered = t.consume_auto_ack + t.consume_manual_ack + t.get_auto_ack + t.get_manual_ack
    return {
        "received": t.received,
        "received_confirm": t.confirm_received,
        "routed": t.received - t.unroutable,
        "unroutable_dropped": t.unroutable - t.returned,
        "unroutable_returned": t.returned,
        "confirmed": t.confirmed,
        "delivered": delivered,
        "delivered_consume_auto_ack": t.consume_auto_ack,
        "delivered_consume_manual_ack": t.consume_manual_ack,
        "delivered_get_auto_ack": t.get_auto_ack,
        "delivered_get_manual_ack": t.get_manual_ack,
        "get_empty": t.get_empty,
    }


def _global(out: Exposition, protocols: list[ProtocolTotals], overview: OverviewInfo) -> None:
    """RabbitMQ's global counters, one series per protocol (label ``protocol``)."""
    values = {t.protocol: _global_values(t) for t in protocols}
    for key, help_text in GLOBAL_COUNTERS:
        out.metric(
            f"rabbitmq_global_messages_{key}_total",
            "counter",
            help_text,
            [({"protocol": p}, v[key]) for p, v in values.items()],
        )
    totals = overview.totals
    # counted per queue (every protocol's): no protocol label
    out.one("rabbitmq_global_messages_acknowledged_total", "counter", "Messages acknowledged",
            totals.acked)  # fmt: skip
    out.one("rabbitmq_global_messages_redelivered_total", "counter", "Messages redelivered",
            totals.redelivered)  # fmt: skip
    out.metric("rabbitmq_global_publishers", "gauge", "Connections that publish",
               [({"protocol": t.protocol}, t.publishers) for t in protocols])  # fmt: skip
    out.metric("rabbitmq_global_consumers", "gauge", "Consumers",
               [({"protocol": t.protocol}, t.consumers) for t in protocols])  # fmt: skip
    stream_errors = {n: v for t in protocols if t.protocol == "stream" for n, v in t.errors}
    for error in STREAM_ERRORS:  # the stream protocol's error answers, by response code
        out.metric(f"rabbitmq_global_stream_error_{error}_total", "counter",
                   f"Stream protocol errors: {error.replace('_', ' ')}",
                   [({"protocol": "stream"}, stream_errors.get(error, 0))])  # fmt: skip
    out.histogram(
        "rabbitmq_message_size_bytes",
        "Size of the messages received from publishers",
        [({"protocol": t.protocol}, SIZE_LE, t.sizes, t.size_sum) for t in protocols if t.sizes],
    )


DLX_REASONS = {"expired": "expired", "rejected": "rejected", "maxlen": "maxlen",
               "delivery_limit": "delivery_limit"}  # fmt: skip


def _dead_lettered(out: Exposition, counts: dict[tuple[str, str], int]) -> None:
    """RabbitMQ's labels: a classic queue's dead-lettering has no strategy ("disabled"),
    a quorum queue's is at-most-once (Roost's single-node quorum queues are)."""
    kinds = (("classic", "rabbit_classic_queue", "disabled"),
             ("quorum", "rabbit_quorum_queue", "at_most_once"))  # fmt: skip
    for reason in DLX_REASONS:
        samples = []
        for kind, queue_type, strategy in kinds:
            n = sum(v for (k, r), v in counts.items() if r == reason and
                    (k == kind or (kind == "classic" and k != "quorum")))  # fmt: skip
            samples.append(({"queue_type": queue_type, "dead_letter_strategy": strategy}, n))
        out.metric(f"rabbitmq_global_messages_dead_lettered_{reason}_total", "counter",
                   f"Messages dead-lettered ({reason.replace('_', ' ')})", samples)  # fmt: skip
    out.metric("rabbitmq_global_messages_dead_lettered_confirmed_total", "counter",
               "Messages dead-lettered at least once and confirmed by their target queues",
               [({"queue_type": "rabbit_quorum_queue", "dead_letter_strategy": "at_least_once"},
                 0)])  # fmt: skip


def _streams(out: Exposition, queues: list[QueueInfo], per_object: bool) -> None:
    """Consumer lag (RabbitMQ's stream_consumer_max_offset_lag: the furthest-behind
    consumer of each stream) and, per stream, its first and next offsets."""
    streams = [q for q in queues if q.type == "stream"]
    if per_object:
        rows = [({"vhost": q.vhost, "queue": q.name}, q) for q in streams]
        out.metric("rabbitmq_stream_consumer_max_offset_lag", "gauge",
                   "Highest consumer offset lag", [(lb, q.max_offset_lag) for lb, q in rows])
        out.metric("roost_stream_first_offset", "gauge", "First offset the stream keeps",
                   [(lb, q.first_offset) for lb, q in rows])
        out.metric("roost_stream_next_offset", "gauge", "Offset the next message gets",
                   [(lb, q.next_offset) for lb, q in rows])  # fmt: skip
    else:
        out.one("rabbitmq_stream_consumer_max_offset_lag", "gauge", "Highest consumer offset lag",
                max((q.max_offset_lag for q in streams), default=0))  # fmt: skip


def _raft(
    out: Exposition, queues: list[QueueInfo], port: ManagementPort, per_object: bool
) -> None:
    """A single-node quorum queue as RabbitMQ's Raft metrics see one: term 1, every
    enqueue and settlement an entry written and committed at once, no snapshot; the
    commit latency is the store's mean fsync (quorum queues write before confirming)."""
    quorum = [q for q in queues if q.type == "quorum"]
    store = port.activity.store_info()
    latency = store.fsync_seconds_sum / store.fsyncs if store and store.fsyncs else 0.0

    def series(value: float | None = None) -> list[tuple[Labels, float]]:
        rows = [
            ({"vhost": q.vhost, "queue": q.name}, q.published + q.acked if value is None else value)
            for q in quorum
        ]
        if per_object:
            return rows
        return [({}, sum(v for _, v in rows) if value is None else (value if quorum else 0))]

    for name, kind, help_text, value in (
        ("rabbitmq_raft_term_total", "counter", "Current Raft term number", 1.0),
        ("rabbitmq_raft_term", "gauge", "Current Raft term number", 1.0),
        ("rabbitmq_raft_log_snapshot_index", "gauge", "Raft log snapshot index", 0.0),
        ("rabbitmq_raft_snapshot_index", "gauge", "Raft log snapshot index", 0.0),
        ("rabbitmq_raft_log_last_applied_index", "gauge", "Raft log last applied index", None),
        ("rabbitmq_raft_log_commit_index", "gauge", "Raft log commit index", None),
        ("rabbitmq_raft_commit_index", "gauge", "Raft log commit index", None),
        ("rabbitmq_raft_log_last_written_index", "gauge", "Raft log last written index", None),
        ("rabbitmq_raft_last_written_index", "gauge", "Raft log last written index", None),
        ("rabbitmq_raft_entry_commit_latency_seconds", "gauge",
         "Time taken for a log entry to be committed", latency),
        ("rabbitmq_raft_commit_latency_seconds", "gauge",
         "Time taken for a log entry to be committed", latency),
    ):  # fmt: skip
        out.metric(name, kind, help_text, series(value))


def _connections(
    out: Exposition, port: ManagementPort, overview: OverviewInfo, per_object: bool
) -> None:
    totals = overview.totals
    if per_object:
        connections = port.activity.list_connections()
        in_bytes = [({"connection": c.name, "vhost": c.vhost}, c.recv_oct) for c in connections]
        out_bytes = [({"connection": c.name, "vhost": c.vhost}, c.send_oct) for c in connections]
    else:  # every byte since start, closed connections included: a true counter
        in_bytes, out_bytes = [({}, totals.recv_oct)], [({}, totals.send_oct)]
    out.metric("rabbitmq_connection_incoming_bytes_total", "counter", "Bytes received", in_bytes)
    out.metric("rabbitmq_connection_outgoing_bytes_total", "counter", "Bytes sent", out_bytes)


async def handler(request: web.Request) -> web.Response:
    per_object = request.match_info.get("kind") == "per-object" or "per_object" in request.query
    body = render(request.app[PORT], per_object=per_object)
    return web.Response(body=body.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})
