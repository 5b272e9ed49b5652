"""The same permissions on STOMP: each refused frame gets an ERROR whose message header is
``access_refused`` and whose body is RabbitMQ's text (observed on RabbitMQ 3.10.8's STOMP
plugin, with the permission named as current RabbitMQ does); the connection closes, other
connections carry on."""

from __future__ import annotations

import os
from typing import Any

import pika
import pytest

from tests.security.conftest import MakeUser
from tests.stomp.conftest import Connect, Inbox, connect  # noqa: F401 (fixture)
from tests.support import RoostProcess

REFUSED = (
    "ACCESS_REFUSED - {perm} access to {kind} '{name}' in vhost '/' refused for user '{user}'"
)


@pytest.fixture
def t() -> str:
    return os.urandom(4).hex()


def error_of(inbox: Inbox) -> Any:
    return inbox.errors.get(timeout=5)


def test_subscribe_to_a_queue_it_may_not_configure(
    connect: Connect, make_user: MakeUser, t: str  # noqa: F811
) -> None:
    user = make_user(f"^c{t}", ".*", ".*")
    conn, inbox = connect(username=user, passcode="pw")
    conn.subscribe(f"/queue/x{t}", id="1")
    err = error_of(inbox)
    assert err.headers["message"] == "access_refused"
    assert err.body == REFUSED.format(perm="configure", kind="queue", name=f"x{t}", user=user)


def test_send_needs_write_on_the_default_exchange(
    connect: Connect, make_user: MakeUser, t: str  # noqa: F811
) -> None:
    user = make_user(f"^c{t}", f"^w{t}", ".*")
    conn, inbox = connect(username=user, passcode="pw")
    conn.send(f"/queue/c{t}", "hi")
    err = error_of(inbox)
    assert err.body == REFUSED.format(perm="write", kind="exchange", name="amq.default", user=user)


def test_send_to_a_topic_needs_write_on_amq_topic(
    connect: Connect, make_user: MakeUser, t: str  # noqa: F811
) -> None:
    user = make_user(".*", f"^w{t}", ".*")
    conn, inbox = connect(username=user, passcode="pw")
    conn.send("/topic/news", "hi")
    err = error_of(inbox)
    assert err.body == REFUSED.format(perm="write", kind="exchange", name="amq.topic", user=user)


def test_subscribe_to_an_existing_queue_needs_read(
    roost: RoostProcess, connect: Connect, make_user: MakeUser, t: str  # noqa: F811
) -> None:
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as admin:
        admin.channel().queue_declare(f"x{t}")
    user = make_user(".*", ".*", f"^r{t}")
    conn, inbox = connect(username=user, passcode="pw")
    conn.subscribe(f"/amq/queue/x{t}", id="1")
    err = error_of(inbox)
    assert err.body == REFUSED.format(perm="read", kind="queue", name=f"x{t}", user=user)


def test_topic_subscription_binds_with_read_on_amq_topic(
    connect: Connect, make_user: MakeUser, t: str  # noqa: F811
) -> None:
    """A /topic subscription declares its own queue (configure) and binds it to amq.topic:
    write on the queue, read on amq.topic."""
    user = make_user(".*", ".*", f"^r{t}")
    conn, inbox = connect(username=user, passcode="pw")
    conn.subscribe("/topic/news", id="1")
    err = error_of(inbox)
    assert err.body == REFUSED.format(perm="read", kind="exchange", name="amq.topic", user=user)


def test_allowed_user_works_and_others_are_unaffected(
    connect: Connect, make_user: MakeUser, t: str  # noqa: F811
) -> None:
    refused = make_user("^$", "^$", "^$")
    bad, bad_inbox = connect(username=refused, passcode="pw")
    user = make_user(f"^c{t}", ".*", f"^c{t}")
    conn, inbox = connect(username=user, passcode="pw")
    bad.send(f"/queue/c{t}", "nope")
    assert bad_inbox.errors.get(timeout=5).headers["message"] == "access_refused"
    conn.subscribe(f"/queue/c{t}", id="1")
    conn.send(f"/queue/c{t}", "hello", receipt="r1")
    assert inbox.receipt() == "r1"
    assert inbox.message().body == "hello"
