"""The connection registry: every open client connection, and the last closed ones.

A protocol adapter's connection is registered by ``Broker.connect`` once its user and
vhost are checked, and unregistered by ``Broker.disconnect``. The registry keeps, for
the management API, a snapshot of each recently closed connection with the reason it
closed (``CLOSED_KEPT`` of them), and folds the closed connection's byte counts into the
broker's lifetime totals so they never go down.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from roost.core.client import ClientCounts, protocol_label
from roost.core.errors import NotFound
from roost.core.info import ChannelInfo, ConnectionInfo, ConnectionRef

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.session import Session
    from roost.core.stats import Counters, RateSampler

log = logging.getLogger("roost.connection")  # the "connection" log category

CLOSED_KEPT = 100  # recently closed connections kept, with the reason each closed


class Connections:
    def __init__(self, counters: Counters, snapshot: Callable[[Client], ConnectionInfo]) -> None:
        """``snapshot`` makes a connection's management view (core.activity)."""
        self.clients: dict[int, Client] = {}
        self.closed: deque[ConnectionInfo] = deque(maxlen=CLOSED_KEPT)
        self._counters = counters
        self._snapshot = snapshot

    def __len__(self) -> int:
        return len(self.clients)

    def __contains__(self, client: Client) -> bool:
        return client.id in self.clients

    def __iter__(self) -> Iterator[Client]:
        return iter(self.clients.values())

    def add(self, client: Client) -> None:
        self.clients[client.id] = client
        self._counters.connection_created += 1
        if log.isEnabledFor(logging.INFO):
            fields = _fields(client)
            log.info(
                "%s connection %s%s: user '%s' authenticated and granted access to vhost '%s'",
                client.protocol, client.peer, _named(fields), client.user.name,
                client.vhost.name, extra=fields,
            )  # fmt: skip

    def remove(self, client: Client, reason: str) -> bool:
        """Unregister; keep a snapshot with the reason. False if it was not registered."""
        if self.clients.pop(client.id, None) is None:
            return False
        info = replace(
            self._snapshot(client),
            state="closed",
            closed_reason=reason,
            closed_at=time.time(),
            channels=0,
        )
        self.closed.append(info)
        if log.isEnabledFor(logging.INFO):
            fields = _fields(client)
            log.info(
                "closing %s connection %s (%svhost: '%s', user: '%s'): %s",
                client.protocol, client.peer, f"{fields['client']}, " if fields["client"] else "",
                client.vhost.name, client.user.name, reason, extra={**fields, "reason": reason},
            )  # fmt: skip
        c = self._counters
        c.connection_closed += 1
        c.retired_recv_oct += client.traffic.recv_oct
        c.retired_send_oct += client.traffic.send_oct
        label = protocol_label(client.protocol)
        retired = c.retired_counts.get(label)
        if retired is None:
            retired = c.retired_counts[label] = ClientCounts()
        retired.add(client.counts)
        return True

    def named(self, name: str) -> Client:
        for client in self.clients.values():
            if client.peer == name:
                return client
        raise NotFound(f"no connection '{name}'")

    def close_where(self, matches: Callable[[Client], bool], reason: str) -> None:
        """Ask every matching connection to close (a deleted user or vhost)."""
        for client in list(self.clients.values()):
            if matches(client):
                client.force_close(reason)

    def sessions(self, vhost: str | None = None) -> Iterator[Session]:
        for client in self.clients.values():
            if vhost is None or client.vhost.name == vhost:
                yield from client.sessions


def _fields(client: Client) -> dict[str, str]:
    """What a connection's log lines carry as fields (the JSON formatter writes them)."""
    props = client.properties
    given = props.get("connection_name")
    product = props.get("product")
    name = given if isinstance(given, str) and given else ""
    return {
        "protocol": client.protocol,
        "peer": client.peer,
        "user": client.user.name,
        "vhost": client.vhost.name,
        "client": name,
        "client_product": product if isinstance(product, str) else "",
    }


def _named(fields: dict[str, str]) -> str:
    """RabbitMQ adds the client-provided connection name: `` (peer - name)``."""
    return f" ({fields['client']})" if fields["client"] else ""


def split_peer(peer: str) -> tuple[str, int]:
    host, _, port = peer.rpartition(":")
    try:
        return host or peer, int(port)
    except ValueError:
        return peer, 0


def connection_info(client: Client, sampler: RateSampler) -> ConnectionInfo:
    host, port = split_peer(client.peer)
    given = client.properties.get("connection_name")
    t = client.traffic
    return ConnectionInfo(
        id=client.id,
        name=client.peer,
        user_provided_name=given if isinstance(given, str) and given else None,
        vhost=client.vhost.name,
        user=client.user.name,
        protocol=client.protocol,
        peer_host=host,
        peer_port=port,
        connected_at=client.opened_at,
        client_properties=dict(client.properties),
        channels=len(client.sessions),
        recv_oct=t.recv_oct,
        send_oct=t.send_oct,
        recv_cnt=t.recv_cnt,
        send_cnt=t.send_cnt,
        rates=sampler.rates(client),
        state=client.alarm_state or ("flow" if client.flow_held else "running"),
        ssl=client.ssl,
        auth_mechanism=client.auth_mechanism,
    )


def connection_ref(client: Client) -> ConnectionRef:
    host, port = split_peer(client.peer)
    return ConnectionRef(client.peer, host, port, client.user.name)


def channel_info(session: Session) -> ChannelInfo:
    client = session.client
    return ChannelInfo(
        connection=connection_ref(client),
        number=getattr(session, "number", 0),
        vhost=client.vhost.name,
        user=client.user.name,
        consumer_count=len(session.consumers),
        messages_unacknowledged=session.unacked_count,
        messages_unconfirmed=session.unconfirmed(),
        prefetch_count=session.prefetch_count,
        global_prefetch_count=session.global_prefetch,
        state="running" if session.flow_active else "flow",
        confirm=session.confirm,
        transactional=session.transactional,
    )
