"""The Spark data source's node list (option ``url``): how it is split, which failures
move a call to the next node, and that the retrying is bounded. Real sockets on loopback
ports nothing listens on; the end-to-end failover is tests/spark/test_replicated_stream.py."""

from __future__ import annotations

import time

import pytest

from roost.client import ChannelClosed, ConnectionLost
from roost.pipeline.amqp import RoostError, Unreachable, node_urls
from roost.pipeline.failover import Nodes, retryable
from tests.support import free_port


def test_url_lists_nodes_separated_by_commas() -> None:
    one = "amqp://u:p@h1:5672/%2F"
    assert node_urls(one) == [one]
    assert node_urls(f" {one} , amqps://h2:5671/v,AMQP://h3 ") == [
        one, "amqps://h2:5671/v", "AMQP://h3"
    ]
    # a comma inside a URL (a password written literally) does not split it
    assert node_urls("amqp://u:a,b@h1/%2F") == ["amqp://u:a,b@h1/%2F"]


def test_what_moves_a_call_to_the_next_node() -> None:
    assert retryable(Unreachable("cannot connect to h:1: refused"))
    assert retryable(ConnectionLost("the broker closed the connection"))
    down = "NOT_FOUND - home node 'n1' of durable queue 's' in vhost '/' is down or inaccessible"
    assert retryable(ChannelClosed(404, down, 60, 70))
    relayed = (
        "PRECONDITION_FAILED - one consumer per connection node for stream queue 's' in"
        " vhost '/' led on node 'n1': consume on the leader's node for more"
    )
    assert retryable(ChannelClosed(406, relayed, 60, 20))
    assert retryable(ChannelClosed(541, "INTERNAL_ERROR", 50, 10))
    # what no other node would answer differently fails at once
    assert not retryable(RoostError("no stream 'x' on the broker", 404))
    invalid = "PRECONDITION_FAILED - invalid x-stream-offset 'x'"
    assert not retryable(ChannelClosed(406, invalid, 60, 20))
    assert not retryable(ChannelClosed(403, "ACCESS_REFUSED", 60, 20))
    assert not retryable(ValueError("bad"))


def test_one_url_is_not_retried() -> None:
    nodes = Nodes(f"amqp://127.0.0.1:{free_port()}/%2F", timeout=30)
    began = time.monotonic()
    with pytest.raises(Unreachable):
        nodes.run(lambda client: client.stream_info("s"))
    assert time.monotonic() - began < 5


def test_several_nodes_are_tried_in_turn_until_the_timeout() -> None:
    urls = [f"amqp://127.0.0.1:{free_port()}/%2F" for _ in range(3)]
    nodes = Nodes(",".join(urls), timeout=1.0)
    began = time.monotonic()
    with pytest.raises(RoostError, match=r"no node of 3 served the request for 1 s"):
        nodes.run(lambda client: client.stream_info("s"))
    took = time.monotonic() - began
    assert 1.0 <= took < 10, took  # bounded: the pauses grow to 2 s at most
    assert nodes.url in urls
