"""What the broker is built with: every setting a component reads, given at construction.

The server turns its ``Config`` into one ``BrokerSettings``; unit tests use the defaults
(RabbitMQ's). Nothing is set on a component after it is built.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

from roost.core.alarms import (
    DEFAULT_DISK_FREE_LIMIT,
    DEFAULT_MEMORY_WATERMARK,
    DEFAULT_PAGING_RATIO,
)


@dataclass(frozen=True)
class BrokerSettings:
    # users that may log in from loopback addresses only (RabbitMQ's loopback_users)
    loopback_users: frozenset[str] = frozenset({"guest"})
    # connections to the whole broker; 0 = no limit (--max-connections)
    max_connections: int = 0
    # 0 = no limit (--consumer-max-per-channel)
    consumer_max_per_channel: int = 0
    # RabbitMQ's default; AMQP refuses a bigger message earlier, from its content header
    max_message_size: int = 128 * 1024 * 1024
    # failed logins a peer host may make in a minute; 0 = no throttling
    max_failed_logins_per_minute: int = 0
    # the default consumer acknowledgement timeout; 0 = none (--consumer-timeout-ms)
    consumer_timeout_ms: int = 0
    # seconds a congested queue holds its publishers for a consumer that waits on its
    # own socket but takes nothing (core/flow.py); 0 = no cap (--flow-socket-wait-cap)
    flow_socket_wait_cap: float = 60.0
    # resource alarms (core/alarms.py)
    vm_memory_high_watermark: str = DEFAULT_MEMORY_WATERMARK
    vm_memory_high_watermark_paging_ratio: float = DEFAULT_PAGING_RATIO
    disk_free_limit: str = DEFAULT_DISK_FREE_LIMIT
    # where the server keeps its data (shown by the API; the core opens no files)
    data_dir: str = "."
    # time one published message in this many for the latency histograms; 0 = none
    latency_sample: int = 16
    cluster_name: str = field(default_factory=lambda: f"roost@{platform.node()}")
