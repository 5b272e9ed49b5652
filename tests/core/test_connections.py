"""core/connections.py on its own: the registry of open connections and the last closed
ones, with the reason and the bytes folded into the lifetime totals."""

from __future__ import annotations

import pytest

from roost.core.connections import CLOSED_KEPT, split_peer
from roost.core.errors import NotFound
from tests.core.components import parts


def test_add_and_remove_count_and_keep_the_reason() -> None:
    p = parts()
    client = p.client(peer="10.0.0.1:5555")
    assert client in p.connections and len(p.connections) == 1
    assert p.connections.named("10.0.0.1:5555") is client
    client.traffic.recv_oct, client.traffic.send_oct = 100, 200
    assert p.connections.remove(client, "client closed the socket")
    assert not p.connections.remove(client, "again")  # once only
    counters = p.stats.counters
    assert (counters.connection_created, counters.connection_closed) == (1, 1)
    assert (counters.retired_recv_oct, counters.retired_send_oct) == (100, 200)
    [closed] = p.connections.closed
    assert (closed.name, closed.state, closed.closed_reason) == (
        "10.0.0.1:5555", "closed", "client closed the socket"
    )
    with pytest.raises(NotFound):
        p.connections.named("10.0.0.1:5555")


def test_only_the_last_closed_connections_are_kept() -> None:
    p = parts()
    for i in range(CLOSED_KEPT + 5):
        p.connections.remove(p.client(peer=f"127.0.0.1:{1000 + i}"), "bye")
    assert len(p.connections.closed) == CLOSED_KEPT
    assert p.connections.closed[0].name == "127.0.0.1:1005"


def test_close_where_asks_only_the_matching_connections() -> None:
    p = parts()
    asked: list[str] = []
    a, b = p.client(peer="127.0.0.1:1"), p.client(peer="127.0.0.1:2")
    a._closer = lambda reason: asked.append(f"a {reason}")
    b._closer = lambda reason: asked.append(f"b {reason}")
    p.connections.close_where(lambda c: c is b, "maintenance")
    assert asked == ["b maintenance"]


def test_split_peer_reads_ipv6_and_odd_names() -> None:
    assert split_peer("[::1]:5672") == ("[::1]", 5672)
    assert split_peer("127.0.0.1:80") == ("127.0.0.1", 80)
    assert split_peer("management") == ("management", 0)
