"""core.info snapshots → the JSON shapes of RabbitMQ 3.10's management API.

Fields RabbitMQ reports that have no meaning here (Erlang garbage collection, reductions,
paging to disk) are left out rather than faked.
"""

from __future__ import annotations

import datetime
import platform
from typing import Any

from roost.core.info import (
    BindingInfo,
    ChannelInfo,
    ConnectionInfo,
    ConnectionRef,
    ConsumerInfo,
    ExchangeInfo,
    PermissionInfo,
    PolicyInfo,
    QueueInfo,
    Rates,
    TopicPermissionInfo,
    UserInfo,
    VHostInfo,
)
from roost.http.util import details

# This node's name: the broker's default cluster name, or a cluster's --node-name (set
# by create_app from the management port).
NODE = f"roost@{platform.node()}"


def stats(rates: Rates, counters: dict[str, int]) -> dict[str, Any]:
    """``message_stats``: each counter with its ``_details.rate``."""
    out: dict[str, Any] = {}
    for name, value in counters.items():
        out[name] = value
        out[f"{name}_details"] = details(rates, name)
    return out


def iso(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat(timespec="milliseconds")


def connection_ref(ref: ConnectionRef) -> dict[str, Any]:
    return {"name": ref.name, "peer_host": ref.peer_host, "peer_port": ref.peer_port}


def queue(q: QueueInfo, *, consumers: list[ConsumerInfo] | None = None) -> dict[str, Any]:
    m, r = q.messages, q.rates
    out: dict[str, Any] = {
        "name": q.name,
        "vhost": q.vhost,
        "type": q.type,
        "durable": q.durable,
        "auto_delete": q.auto_delete,
        "exclusive": q.exclusive,
        "arguments": q.arguments,
        "node": q.node or NODE,
        "state": q.state,
        "consumers": q.consumers,
        "consumer_capacity": 1.0 if q.consumers else 0,
        "consumer_utilisation": 1.0 if q.consumers else 0,
        "exclusive_consumer_tag": q.exclusive_consumer_tag,
        "policy": q.policy.name if q.policy else None,
        "operator_policy": q.operator_policy.name if q.operator_policy else None,
        "effective_policy_definition": q.effective_definition,
        "messages": m.total,
        "messages_details": details(r, "messages"),
        "messages_ready": m.ready,
        "messages_ready_details": details(r, "messages_ready"),
        "messages_unacknowledged": m.unacknowledged,
        "messages_unacknowledged_details": details(r, "messages_unacknowledged"),
        "message_bytes": m.bytes_ready,
        "message_bytes_ready": m.bytes_ready,
        "message_stats": stats(
            r,
            {
                "publish": q.published,
                "deliver_get": q.delivered,
                "ack": q.acked,
                "redeliver": q.redelivered,
            },
        ),
    }
    if q.owner is not None:
        out["owner_pid_details"] = connection_ref(q.owner)
    if q.leader is not None:  # a cluster's replicated quorum queue, as RabbitMQ shows one
        out.update(leader=q.leader, members=q.members, online=q.online, node=q.leader)
    if consumers is not None:
        out["consumer_details"] = [consumer(c) for c in consumers]
        out["incoming"] = []
        out["deliveries"] = []
    return out


def exchange(x: ExchangeInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": x.name,
        "vhost": x.vhost,
        "type": x.type,
        "durable": x.durable,
        "auto_delete": x.auto_delete,
        "internal": x.internal,
        "arguments": x.arguments,
        "policy": x.policy.name if x.policy else None,
        "user_who_performed_action": "rmq-internal" if not x.name else "",
    }
    if x.publish_in or x.publish_out:
        out["message_stats"] = stats(
            x.rates, {"publish_in": x.publish_in, "publish_out": x.publish_out}
        )
    return out


def binding(b: BindingInfo) -> dict[str, Any]:
    return {
        "source": b.source,
        "vhost": b.vhost,
        "destination": b.destination,
        "destination_type": b.destination_type,
        "routing_key": b.routing_key,
        "arguments": b.arguments,
        "properties_key": b.properties_key,
    }


def connection(c: ConnectionInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": c.name,
        "user_provided_name": c.user_provided_name,
        "node": NODE,
        "type": "network",
        "state": c.state,
        "vhost": c.vhost,
        "user": c.user,
        "user_who_performed_action": c.user,
        "protocol": c.protocol,
        "auth_mechanism": c.auth_mechanism,
        "ssl": c.ssl,
        "peer_host": c.peer_host,
        "peer_port": c.peer_port,
        "connected_at": int(c.connected_at * 1000),
        "client_properties": _jsonable(c.client_properties),
        "channels": c.channels,
        "recv_oct": c.recv_oct,
        "recv_oct_details": details(c.rates, "recv_oct"),
        "send_oct": c.send_oct,
        "send_oct_details": details(c.rates, "send_oct"),
        "recv_cnt": c.recv_cnt,
        "send_cnt": c.send_cnt,
    }
    if c.closed_reason is not None:
        out["closed_reason"] = c.closed_reason
        out["closed_at"] = int((c.closed_at or 0) * 1000)
    return out


def channel(ch: ChannelInfo) -> dict[str, Any]:
    return {
        "name": ch.name,
        "number": ch.number,
        "node": NODE,
        "connection_details": connection_ref(ch.connection),
        "vhost": ch.vhost,
        "user": ch.user,
        "user_who_performed_action": ch.user,
        "state": ch.state,
        "consumer_count": ch.consumer_count,
        "messages_unacknowledged": ch.messages_unacknowledged,
        "messages_unconfirmed": ch.messages_unconfirmed,
        "messages_uncommitted": 0,
        "acks_uncommitted": 0,
        "prefetch_count": ch.prefetch_count,
        "global_prefetch_count": ch.global_prefetch_count,
        "confirm": ch.confirm,
        "transactional": ch.transactional,
    }


def consumer(c: ConsumerInfo) -> dict[str, Any]:
    ch = c.channel
    return {
        "consumer_tag": c.consumer_tag,
        "queue": {"name": c.queue, "vhost": c.vhost},
        "channel_details": {
            "name": ch.name,
            "number": ch.number,
            "connection_name": ch.connection.name,
            "peer_host": ch.connection.peer_host,
            "peer_port": ch.connection.peer_port,
            "user": ch.user,
            "node": NODE,
        },
        "ack_required": c.ack_required,
        "exclusive": c.exclusive,
        "prefetch_count": c.prefetch_count,
        "arguments": _jsonable(c.arguments),
        "active": c.active,
        "activity_status": _activity_status(c),
    }


def _activity_status(c: ConsumerInfo) -> str:
    """RabbitMQ's words: a single active consumer is ``single_active``, the others wait."""
    if not c.active:
        return "waiting"
    return "single_active" if c.single_active else "up"


def vhost(v: VHostInfo) -> dict[str, Any]:
    m, r, queue_type = v.messages, v.rates, v.default_queue_type
    return {
        "name": v.name,
        "description": v.description,
        "tags": list(v.tags),
        "default_queue_type": v.default_queue_type,
        # RabbitMQ 3.10 has the type in the metadata once one was set
        "metadata": {"description": v.description, "tags": list(v.tags)}
        | ({} if queue_type == "classic" else {"default_queue_type": queue_type}),
        "tracing": v.tracing,
        "cluster_state": {NODE: "running"},
        "messages": m.total,
        "messages_details": details(r, "messages"),
        "messages_ready": m.ready,
        "messages_ready_details": details(r, "messages_ready"),
        "messages_unacknowledged": m.unacknowledged,
        "messages_unacknowledged_details": details(r, "messages_unacknowledged"),
        "message_stats": stats(r, {"publish": v.published}),
        "recv_oct": v.recv_oct,
        "recv_oct_details": details(r, "recv_oct"),
        "send_oct": v.send_oct,
        "send_oct_details": details(r, "send_oct"),
    }


def user(u: UserInfo) -> dict[str, Any]:
    return {
        "name": u.name,
        "password_hash": u.password_hash,
        "hashing_algorithm": u.hashing_algorithm,
        "tags": list(u.tags),
        "limits": {},
    }


def permission(p: PermissionInfo) -> dict[str, Any]:
    return {
        "user": p.user,
        "vhost": p.vhost,
        "configure": p.configure,
        "write": p.write,
        "read": p.read,
    }


def topic_permission(p: TopicPermissionInfo) -> dict[str, Any]:
    return {
        "user": p.user,
        "vhost": p.vhost,
        "exchange": p.exchange,
        "write": p.write,
        "read": p.read,
    }


def policy(p: PolicyInfo) -> dict[str, Any]:
    return {
        "vhost": p.vhost,
        "name": p.name,
        "pattern": p.pattern,
        "apply-to": p.apply_to,
        "definition": p.definition,
        "priority": p.priority,
    }


def _jsonable(value: Any) -> Any:
    """AMQP tables may hold bytes, decimals and datetimes: make them JSON-safe."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


jsonable = _jsonable
