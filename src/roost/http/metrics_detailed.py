"""``/metrics/detailed?family=…&vhost=…``: RabbitMQ's detailed registry, per-object series
of the metric groups asked for (``family`` repeated), named ``rabbitmq_detailed_*``, queue
groups limited to the vhosts asked for (``vhost`` repeated; all when absent). With no
family, only the identity and build series, as RabbitMQ answers. Groups Roost has no
figures for (Erlang process reductions, auth attempt details) are accepted and empty.
"""

from __future__ import annotations

from aiohttp import web

from roost.core.info import QueueInfo
from roost.core.ports.management import ManagementPort
from roost.http.exposition import CONTENT_TYPE, Exposition, Labels
from roost.http.keys import PORT
from roost.http.metrics_node import identity

FAMILIES = (
    "connection_churn_metrics", "node_coarse_metrics", "node_metrics",
    "node_persister_metrics", "ra_metrics", "auth_attempt_metrics",
    "auth_attempt_detailed_metrics", "queue_coarse_metrics", "queue_consumer_count",
    "queue_metrics", "connection_coarse_metrics", "connection_metrics", "channel_metrics",
    "channel_process_metrics", "channel_exchange_metrics", "channel_queue_metrics",
    "channel_queue_exchange_metrics", "vhost_status", "exchange_names", "exchange_bindings",
)  # fmt: skip


def _queue_rows(queues: list[QueueInfo], value: str) -> list[tuple[Labels, float]]:
    rows: list[tuple[Labels, float]] = []
    for q in queues:
        m = q.messages
        figures = {
            "ready": m.ready,
            "unacked": m.unacknowledged,
            "total": m.total,
            "consumers": q.consumers,
            "ready_bytes": m.bytes_ready,
            "published": q.published,
        }
        rows.append(({"vhost": q.vhost, "queue": q.name}, figures[value]))
    return rows


def render(port: ManagementPort, families: list[str], vhosts: list[str]) -> str:
    overview = port.activity.overview()
    head = Exposition()  # identity and build info keep their names, as in RabbitMQ
    identity(head, overview, "detailed")
    out = Exposition("rabbitmq_detailed_")
    out.lines = head.lines
    asked = set(families)
    queues = [q for q in port.queries.list_queues() if not vhosts or q.vhost in vhosts]
    if "connection_churn_metrics" in asked:
        churn = overview.churn
        for name, value in (
            ("connections_opened_total", churn.connection_created),
            ("connections_closed_total", churn.connection_closed),
            ("channels_opened_total", churn.channel_created),
            ("channels_closed_total", churn.channel_closed),
            ("queues_declared_total", churn.queue_declared),
            ("queues_created_total", churn.queue_created),
            ("queues_deleted_total", churn.queue_deleted),
        ):
            out.one(f"rabbitmq_{name}", "counter", name.replace("_", " "), value)
    node = overview.node
    if "node_coarse_metrics" in asked:
        out.one("rabbitmq_process_open_fds", "gauge", "Open file descriptors", node.fd_used)
        out.one("rabbitmq_process_resident_memory_bytes", "gauge", "Memory used", node.mem_used)
        out.one("rabbitmq_disk_space_available_bytes", "gauge", "Disk free", node.disk_free)
    if "node_metrics" in asked:
        out.one("rabbitmq_process_max_fds", "gauge", "File descriptor limit", node.fd_total)
        out.one("rabbitmq_resident_memory_limit_bytes", "gauge", "Memory watermark",
                node.mem_limit)  # fmt: skip
        out.one("rabbitmq_disk_space_available_limit_bytes", "gauge", "Disk free limit",
                node.disk_free_limit)  # fmt: skip
        out.one("rabbitmq_erlang_uptime_seconds", "gauge", "Node uptime", node.uptime_ms / 1000)
    if "node_persister_metrics" in asked and (store := port.activity.store_info()) is not None:
        out.one("rabbitmq_io_sync_ops_total", "counter", "fsync calls", store.fsyncs)
        out.one("rabbitmq_io_sync_time_seconds_total", "counter", "Time in fsync",
                store.fsync_seconds_sum)  # fmt: skip
    if "queue_coarse_metrics" in asked:
        for name, figure, what in (
            ("queue_messages_ready", "ready", "Messages ready to be delivered to consumers"),
            ("queue_messages_unacked", "unacked", "Messages delivered, not yet acknowledged"),
            ("queue_messages", "total", "Ready plus unacknowledged messages"),
        ):
            out.metric(f"rabbitmq_{name}", "gauge", what, _queue_rows(queues, figure))
    if asked & {"queue_consumer_count", "queue_metrics"}:
        out.metric("rabbitmq_queue_consumers", "gauge", "Consumers on a queue",
                   _queue_rows(queues, "consumers"))  # fmt: skip
    if "queue_metrics" in asked:
        out.metric("rabbitmq_queue_messages_ready_bytes", "gauge", "Size of ready messages",
                   _queue_rows(queues, "ready_bytes"))  # fmt: skip
        out.metric("rabbitmq_queue_messages_published_total", "counter",
                   "Messages published to queues", _queue_rows(queues, "published"))  # fmt: skip
    if "ra_metrics" in asked:
        quorum = [q for q in queues if q.type == "quorum"]
        labels = [({"vhost": q.vhost, "queue": q.name}, q) for q in quorum]
        out.metric("rabbitmq_raft_term_total", "counter", "Current Raft term number",
                   [(lb, 1) for lb, _ in labels])  # fmt: skip
        out.metric("rabbitmq_raft_log_commit_index", "gauge", "Raft log commit index",
                   [(lb, q.published + q.acked) for lb, q in labels])  # fmt: skip
    if asked & {"connection_coarse_metrics", "connection_metrics"}:
        connections = port.activity.list_connections()
        out.metric("rabbitmq_connection_incoming_bytes_total", "counter", "Bytes received",
                   [({"connection": c.name}, c.recv_oct) for c in connections])  # fmt: skip
        out.metric("rabbitmq_connection_outgoing_bytes_total", "counter", "Bytes sent",
                   [({"connection": c.name}, c.send_oct) for c in connections])  # fmt: skip
    if "channel_metrics" in asked:
        channels = port.activity.list_channels()
        out.metric("rabbitmq_channel_consumers", "gauge", "Consumers on a channel",
                   [({"channel": c.name}, c.consumer_count) for c in channels])  # fmt: skip
        unacked = [({"channel": c.name}, c.messages_unacknowledged) for c in channels]
        out.metric("rabbitmq_channel_messages_unacked", "gauge", "Unacked deliveries", unacked)
        out.metric("rabbitmq_channel_prefetch", "gauge", "Prefetch limit of the channel",
                   [({"channel": c.name}, c.global_prefetch_count) for c in channels])  # fmt: skip
    if "vhost_status" in asked:
        out.metric("rabbitmq_vhost_status", "gauge", "Whether a vhost is running",
                   [({"vhost": v.name}, 1) for v in port.queries.list_vhosts()])  # fmt: skip
    if "exchange_names" in asked:
        out.metric("rabbitmq_cluster_exchange_name_info", "gauge", "Exchanges", [
            ({"vhost": x.vhost, "exchange": x.name, "type": x.type}, 1)
            for x in port.queries.list_exchanges()
            if not vhosts or x.vhost in vhosts
        ])  # fmt: skip
    return out.text()


async def handler(request: web.Request) -> web.Response:
    families = request.query.getall("family", [])
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        return web.Response(status=400, text=f"unknown metric family: {', '.join(unknown)}\n")
    body = render(request.app[PORT], families, request.query.getall("vhost", []))
    return web.Response(body=body.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})
