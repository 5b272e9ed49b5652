"""Prometheus text exposition, named after RabbitMQ's ``rabbitmq_prometheus`` plugin.

``/metrics`` is aggregated (one series per metric, as RabbitMQ's default endpoint);
``/metrics/per-object`` labels queue and connection series with ``vhost``/``queue``/
``connection``, as RabbitMQ's per-object endpoint does. Keeping the two apart means a
``sum()`` never adds a total to its own parts. No authentication, as in RabbitMQ.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from aiohttp import web

from roost import __version__
from roost.core.info import MutatorTotals
from roost.core.ports.management import ManagementPort
from roost.http.keys import PORT

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


class Exposition:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(
        self,
        name: str,
        kind: str,
        help_text: str,
        samples: Iterable[tuple[dict[str, str], float]],
    ) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            self.lines.append(f"{name}{_labels(labels)} {_number(value)}")

    def one(self, name: str, kind: str, help_text: str, value: float) -> None:
        self.metric(name, kind, help_text, [({}, value)])

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


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


def render(broker: ManagementPort, *, per_object: bool) -> str:
    out = Exposition()
    overview = broker.activity.overview()
    queues = broker.queries.list_queues()

    def per_queue(values: Sequence[float]) -> list[tuple[dict[str, str], float]]:
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

    totals, churn, objects = overview.totals, overview.churn, overview.object_totals
    out.one("rabbitmq_queues", "gauge", "Queues", objects["queues"])
    out.one("rabbitmq_connections", "gauge", "Open connections", objects["connections"])
    out.one("rabbitmq_channels", "gauge", "Open channels", objects["channels"])
    out.one("rabbitmq_consumers", "gauge", "Consumers", objects["consumers"])
    for name, help_text, value in (
        ("rabbitmq_connections_opened_total", "Connections opened", churn.connection_created),
        ("rabbitmq_connections_closed_total", "Connections closed", churn.connection_closed),
        ("rabbitmq_channels_opened_total", "Channels opened", churn.channel_created),
        ("rabbitmq_channels_closed_total", "Channels closed", churn.channel_closed),
        ("rabbitmq_queues_declared_total", "Queues declared", churn.queue_declared),
        ("rabbitmq_queues_created_total", "Queues created", churn.queue_created),
        ("rabbitmq_queues_deleted_total", "Queues deleted", churn.queue_deleted),
        ("rabbitmq_global_messages_received_total", "Messages published", totals.published),
        ("rabbitmq_global_messages_routed_total", "Messages routed to a queue", totals.routed),
        ("rabbitmq_global_messages_delivered_total", "Messages delivered", totals.delivered),
        ("rabbitmq_global_messages_acknowledged_total", "Messages acknowledged", totals.acked),
        ("rabbitmq_global_messages_redelivered_total", "Messages redelivered", totals.redelivered),
    ):
        out.one(name, "counter", help_text, value)

    connections = broker.activity.list_connections()
    if per_object:
        in_bytes = [({"connection": c.name, "vhost": c.vhost}, c.recv_oct) for c in connections]
        out_bytes = [({"connection": c.name, "vhost": c.vhost}, c.send_oct) for c in connections]
    else:  # every byte since start, closed connections included: a true counter
        in_bytes, out_bytes = [({}, totals.recv_oct)], [({}, totals.send_oct)]
    out.metric("rabbitmq_connection_incoming_bytes_total", "counter", "Bytes received", in_bytes)
    out.metric("rabbitmq_connection_outgoing_bytes_total", "counter", "Bytes sent", out_bytes)

    node = overview.node
    out.one("rabbitmq_process_resident_memory_bytes", "gauge", "Resident memory", node.mem_used)
    out.one("rabbitmq_process_open_fds", "gauge", "Open file descriptors", node.fd_used)
    out.one("rabbitmq_process_max_fds", "gauge", "File descriptor limit", node.fd_total)
    out.one("rabbitmq_disk_space_available_bytes", "gauge", "Free disk space", node.disk_free)
    out.one("rabbitmq_alarms_memory_used_watermark", "gauge", "Memory alarm on", node.mem_alarm)
    out.one(
        "rabbitmq_alarms_free_disk_space_watermark", "gauge", "Disk alarm on", node.disk_free_alarm
    )
    out.one(
        "rabbitmq_resident_memory_limit_bytes", "gauge", "Memory high watermark", node.mem_limit
    )
    out.one(
        "rabbitmq_disk_space_available_limit_bytes",
        "gauge",
        "Free disk space low watermark",
        node.disk_free_limit,
    )
    out.metric(
        "rabbitmq_identity_info",
        "gauge",
        "Node identity",
        [({"rabbitmq_node": overview.cluster_name, "rabbitmq_cluster": overview.cluster_name}, 1)],
    )
    out.metric(
        "rabbitmq_build_info",
        "untyped",
        "Version information",
        [
            (
                {
                    "product": "Roost",
                    "product_version": __version__,
                    "python_version": node.python_version,
                },
                1,
            )
        ],
    )
    _store(out, broker)
    _mutators(out, broker.activity.mutator_totals())
    return out.text()


def _mutators(out: Exposition, mutators: MutatorTotals) -> None:
    out.one("roost_mutator_failures_total", "counter",
            "Messages refused because a message mutator raised an error",
            mutators.failures)
    out.one("roost_mutator_rejected_total", "counter",
            "Messages a message mutator rejected", mutators.rejected)
    out.one("roost_mutator_dropped_total", "counter",
            "Messages a message mutator dropped", mutators.dropped)


def _store(out: Exposition, broker: ManagementPort) -> None:
    store = broker.activity.store_info()
    if store is None:
        return  # no durable store attached: nothing to report, rather than zeros
    out.one("roost_store_bytes", "gauge", "Bytes in the message store", store.bytes_on_disk)
    out.one("roost_store_segments", "gauge", "Segment files in the message store", store.segments)
    out.one("rabbitmq_io_sync_ops_total", "counter", "fsync calls", store.fsyncs)
    out.one(
        "rabbitmq_io_sync_time_seconds_total", "counter", "Time in fsync", store.fsync_seconds_sum
    )
    name = "roost_store_fsync_seconds"
    out.lines.append(f"# HELP {name} fsync latency of the message store")
    out.lines.append(f"# TYPE {name} histogram")
    for bound, count in store.fsync_buckets:
        out.lines.append(f'{name}_bucket{{le="{bound:g}"}} {count}')
    out.lines.append(f'{name}_bucket{{le="+Inf"}} {store.fsyncs}')
    out.lines.append(f"{name}_sum {_number(store.fsync_seconds_sum)}")
    out.lines.append(f"{name}_count {store.fsyncs}")


async def handler(request: web.Request) -> web.Response:
    per_object = request.match_info.get("kind") == "per-object" or "per_object" in request.query
    body = render(request.app[PORT], per_object=per_object)
    return web.Response(body=body.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})
