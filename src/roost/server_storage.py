"""What the server builds before it listens: the broker's settings from the
configuration, the store (or, with ``--data-dir none``, its in-memory twin), the broker
rebuilt from it or made as RabbitMQ makes a first start, and the cluster node."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from roost.config import Config
from roost.core.auth import Permission, hash_password
from roost.core.broker import Broker, resource_alarms
from roost.core.persistence import Persistence
from roost.core.settings import BrokerSettings
from roost.store.definitions import DefinitionsFile
from roost.store.hub import DiskStore
from roost.store.memory import MemoryDefinitions, MemoryStore
from roost.store.memory_streams import MemoryStreams
from roost.store.stream_chunk import map_amqp10_with
from roost.store.stream_store import StreamFiles
from roost.stream_protocol.chunk_mapping import chunk_message_record
from roost.stream_protocol.publishers import chunk_message_values

NO_DATA_DIR = "none"  # --data-dir none: keep everything in memory (store/memory.py)


def cluster_node(config: Config) -> Any:
    """This node's membership and links (roost.cluster), with --cluster only: a single
    node never imports the etcd client."""
    from roost.cluster.node import ClusterNode, ClusterSettings, default_node_name

    assert config.cluster is not None
    return ClusterNode(
        ClusterSettings(
            url=config.cluster,
            node_name=config.node_name or default_node_name(),
            bind=config.bind_addresses[0],
            cluster_port=config.cluster_port,
            lease_ttl=config.cluster_lease_ttl,
            # --data-dir none: no file remembers the lease across a restart
            data_dir=None if config.data_dir == NO_DATA_DIR else Path(config.data_dir),
        )
    )


def open_storage(
    config: Config, ack_wake: Callable[[float], None] | None = None
) -> tuple[DiskStore | None, Persistence, Broker]:
    """The disk store, then the broker rebuilt from it (or RabbitMQ's first-start defaults).
    ``--data-dir none``: the in-memory twin of every store (store/memory.py) instead.
    ``ack_wake``: the server's timer of acknowledgement deadlines."""
    settings = broker_settings(config)
    map_stream_messages()
    if config.data_dir == NO_DATA_DIR:
        memory = MemoryStore()
        broker = Broker(
            settings, store=memory, stream_storage=MemoryStreams(), ack_wake=ack_wake
        )
        persistence = Persistence(broker, memory, MemoryDefinitions())
        persistence.install()
        first_start(broker, persistence)
        return None, persistence, broker
    data_dir = Path(config.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    alarms = resource_alarms(settings)
    disk = DiskStore(
        data_dir,
        fsync=config.fsync,
        interval_ms=config.fsync_interval_ms,
        segment_size=config.segment_size,
        ack_compact_bytes=config.ack_compact_bytes,
        max_open=config.max_open_files,
        idle_close=config.idle_file_close_s,
        exclusive=True,
        # a store write that fails for lack of space raises the disk alarm
        on_full=alarms.set_store_full,
        retry_interval=config.alarm_check_interval,
    )
    # stream files join the store's group commit
    streams = StreamFiles(data_dir, on_write=disk.file_written, on_no_space=disk.report_no_space)
    broker = Broker(
        settings, store=disk, stream_storage=streams, alarms=alarms, ack_wake=ack_wake
    )
    # the definitions journal is written by a before_flush hook and fsync'ed by that commit
    definitions = DefinitionsFile(data_dir, on_write=disk.hook_wrote)
    persistence = Persistence(broker, disk, definitions)
    persistence.install()
    if not persistence.recover():
        first_start(broker, persistence)
    disk.quarantine_orphans()
    return disk, persistence, broker


def map_stream_messages() -> None:
    """Chunk records keep an AMQP 1.0 message as the stream client sent it; the store
    knows no AMQP 1.0, so its AMQP 0-9-1, STOMP and Spark readers map such a message
    with the stream adapter's mapping, the one it stores other messages with."""
    map_amqp10_with(chunk_message_values, chunk_message_record)


def first_start(broker: Broker, persistence: Persistence) -> None:
    """RabbitMQ's first start (as Broker.with_defaults): vhost '/', guest/guest on it."""
    broker.catalog.add_vhost("/")
    broker.catalog.add_user("guest", hash_password("guest"), tags=["administrator"])
    broker.catalog.set_permission("guest", "/", Permission())
    persistence.save()


def scratch_management() -> Any:
    """A broker with no definitions, in memory: where a definitions file is tried first."""
    return Broker(BrokerSettings(), store=MemoryStore(), stream_storage=MemoryStreams()).management


def broker_settings(config: Config) -> BrokerSettings:
    settings = BrokerSettings(
        loopback_users=frozenset(
            u.strip() for u in config.loopback_users.split(",") if u.strip()
        ),
        max_connections=config.max_connections,
        consumer_max_per_channel=config.consumer_max_per_channel,
        max_message_size=config.max_message_size,
        max_failed_logins_per_minute=config.max_failed_logins_per_minute,
        consumer_timeout_ms=config.consumer_timeout_ms,
        flow_socket_wait_cap=config.flow_socket_wait_cap,
        vm_memory_high_watermark=config.vm_memory_high_watermark,
        vm_memory_high_watermark_paging_ratio=config.vm_memory_high_watermark_paging_ratio,
        disk_free_limit=config.disk_free_limit,
        latency_sample=config.latency_sample,
        # the disk alarm measures the working directory when there is no data directory
        data_dir="." if config.data_dir == NO_DATA_DIR else config.data_dir,
    )
    # --node-name names the node (and by default the cluster) on a single node too
    return replace(settings, cluster_name=config.node_name) if config.node_name else settings
