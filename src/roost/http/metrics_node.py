"""The node's own series in /metrics: its process and resource alarms, the identity and
build labels every dashboard joins on, a cluster's peer links, the message store's size
and fsync latency, the latency histograms and the message mutators' counts."""

from __future__ import annotations

from roost import __version__
from roost.core.info import LatencyInfo, MutatorTotals, OverviewInfo
from roost.core.ports.management import ActivityQueries, ManagementPort
from roost.http.exposition import Exposition


def _node(out: Exposition, overview: OverviewInfo) -> None:
    node, objects = overview.node, overview.object_totals
    out.one("rabbitmq_process_resident_memory_bytes", "gauge", "Resident memory", node.mem_used)
    out.one("rabbitmq_process_open_fds", "gauge", "Open file descriptors", node.fd_used)
    out.one("rabbitmq_process_max_fds", "gauge", "File descriptor limit", node.fd_total)
    # client sockets: each connection holds one; the limit is the descriptors'
    out.one("rabbitmq_process_open_tcp_sockets", "gauge", "Open TCP sockets",
            objects["connections"])  # fmt: skip
    out.one("rabbitmq_process_max_tcp_sockets", "gauge", "TCP sockets limit", node.fd_total)
    out.one("rabbitmq_erlang_uptime_seconds", "gauge", "Node uptime", node.uptime_ms / 1000)
    out.one("rabbitmq_disk_space_available_bytes", "gauge", "Free disk space", node.disk_free)
    out.one("rabbitmq_alarms_memory_used_watermark", "gauge", "Memory alarm on", node.mem_alarm)
    out.one("rabbitmq_alarms_free_disk_space_watermark", "gauge", "Disk alarm on",
            node.disk_free_alarm)  # fmt: skip
    out.one("rabbitmq_resident_memory_limit_bytes", "gauge", "Memory high watermark",
            node.mem_limit)  # fmt: skip
    out.one("rabbitmq_disk_space_available_limit_bytes", "gauge",
            "Free disk space low watermark", node.disk_free_limit)  # fmt: skip


def _peers(out: Exposition, activity: ActivityQueries) -> None:
    """A cluster's links to its running peers, as RabbitMQ's Erlang distribution series
    (``erlang_vm_dist_node_state``: 3 = up, by ``peer`` node); none for a single node."""
    me = activity.node_name
    peers = [m.name for m in activity.cluster_members() if m.running and m.name != me]
    if peers:
        out.metric(
            "erlang_vm_dist_node_state",
            "gauge",
            "The state of the link to a peer node (3 = up)",
            [({"peer": name}, 3) for name in peers],
        )


def identity(out: Exposition, overview: OverviewInfo, endpoint: str) -> None:
    """Every dashboard joins on these two (``group_left(rabbitmq_cluster, rabbitmq_node)``);
    ``rabbitmq_endpoint`` names the registry, as RabbitMQ 4 adds it."""
    labels = {
        "rabbitmq_node": overview.node.name,
        "rabbitmq_cluster": overview.cluster_name,
        "rabbitmq_cluster_permanent_id": f"roost-{overview.cluster_name}",
        "rabbitmq_endpoint": endpoint,
    }
    out.metric("rabbitmq_identity_info", "untyped", "Node and cluster identity", [(labels, 1)])
    out.metric(
        "rabbitmq_build_info",
        "untyped",
        "Version information",
        [
            (
                {
                    "rabbitmq_version": __version__,
                    "product": "Roost",
                    "product_version": __version__,
                    "erlang_version": "none",
                    "python_version": overview.node.python_version,
                },
                1,
            )
        ],
    )


def _latency(out: Exposition, latency: LatencyInfo | None) -> None:
    if latency is None:
        return  # --latency-sample 0
    for name, h, what in (
        ("roost_message_publish_to_deliver_seconds", latency.deliver, "to each delivery"),
        ("roost_message_publish_to_confirm_seconds", latency.confirm, "to its confirm"),
    ):
        bounds = tuple(repr(b) for b in h.bounds)
        out.histogram(
            name,
            f"Time from a message's publish {what}; one message in {latency.every} is timed",
            [({}, bounds, h.buckets, h.total)],
        )


def _mutators(out: Exposition, mutators: MutatorTotals) -> None:
    out.one("roost_mutator_failures_total", "counter",
            "Messages refused because a message mutator raised an error",
            mutators.failures)  # fmt: skip
    out.one("roost_mutator_rejected_total", "counter",
            "Messages a message mutator rejected", mutators.rejected)  # fmt: skip
    out.one("roost_mutator_dropped_total", "counter",
            "Messages a message mutator dropped", mutators.dropped)  # fmt: skip


def _store(out: Exposition, port: ManagementPort) -> None:
    store = port.activity.store_info()
    if store is None:
        return  # no durable store attached: nothing to report, rather than zeros
    out.one("roost_store_bytes", "gauge", "Bytes in the message store", store.bytes_on_disk)
    out.one("roost_store_segments", "gauge", "Segment files in the message store", store.segments)
    out.one("rabbitmq_io_sync_ops_total", "counter", "fsync calls", store.fsyncs)
    out.one("rabbitmq_io_sync_time_seconds_total", "counter", "Time in fsync",
            store.fsync_seconds_sum)  # fmt: skip
    bounds = tuple(f"{b:g}" for b, _ in store.fsync_buckets)
    cumulative = [c for _, c in store.fsync_buckets]
    counts = [b - a for a, b in zip([0, *cumulative], [*cumulative, store.fsyncs], strict=True)]
    out.histogram(
        "roost_store_fsync_seconds",
        "fsync latency of the message store",
        [({}, bounds, counts, store.fsync_seconds_sum)],
    )
