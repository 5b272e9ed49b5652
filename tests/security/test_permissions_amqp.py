"""configure / write / read permissions on every AMQP operation, checked where RabbitMQ
checks them (its access-control table), with RabbitMQ's refusal text (403, channel closed).

A user may configure names starting ``c<T>``, write ``w<T>`` and read ``r<T>``, where T is
unique to the test; ``x<T>`` names are outside every permission. Each expectation below
was observed on RabbitMQ 3.10.8 with pika, except that the text names the permission
("configure access to queue …"), as current RabbitMQ and the issue do (3.10 omits it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import httpx
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from tests.security.conftest import MakeUser, amqp_as, sync
from tests.support import RoostProcess

Op = Callable[[Any, str], Any]

# (id, operation on channel ch with token t, None for allowed or (code, text))
CASES: list[tuple[str, Op, tuple[int, str] | None]] = [
    ("declare queue configurable", lambda ch, t: ch.queue_declare(f"c{t}-new"), None),
    ("declare queue refused", lambda ch, t: ch.queue_declare(f"x{t}-new"),
     (403, "configure access to queue 'x{t}-new' in vhost '/' refused for user '{u}'")),
    ("redeclare existing queue needs configure", lambda ch, t: ch.queue_declare(f"x{t}-q"),
     (403, "configure access to queue 'x{t}-q' in vhost '/' refused for user '{u}'")),
    ("passive declare needs nothing", lambda ch, t: ch.queue_declare(f"x{t}-q", passive=True),
     None),
    ("passive declare of a missing queue is 404",
     lambda ch, t: ch.queue_declare(f"x{t}-none", passive=True),
     (404, "no queue 'x{t}-none' in vhost '/'")),
    ("declare exchange refused", lambda ch, t: ch.exchange_declare(f"x{t}-ex2"),
     (403, "configure access to exchange 'x{t}-ex2' in vhost '/' refused for user '{u}'")),
    ("passive exchange declare needs nothing",
     lambda ch, t: ch.exchange_declare(f"x{t}-ex", "topic", passive=True), None),
    ("delete queue refused", lambda ch, t: ch.queue_delete(f"x{t}-q"),
     (403, "configure access to queue 'x{t}-q' in vhost '/' refused for user '{u}'")),
    ("delete missing queue is checked first", lambda ch, t: ch.queue_delete(f"x{t}-none"),
     (403, "configure access to queue 'x{t}-none' in vhost '/' refused for user '{u}'")),
    ("delete exchange refused", lambda ch, t: ch.exchange_delete(f"x{t}-ex"),
     (403, "configure access to exchange 'x{t}-ex' in vhost '/' refused for user '{u}'")),
    ("bind: write queue, read exchange", lambda ch, t: ch.queue_bind(f"w{t}-q", f"r{t}-ex", "k"),
     None),
    ("bind refused on the queue", lambda ch, t: ch.queue_bind(f"x{t}-q", f"r{t}-ex", "k"),
     (403, "write access to queue 'x{t}-q' in vhost '/' refused for user '{u}'")),
    ("bind refused on the exchange", lambda ch, t: ch.queue_bind(f"w{t}-q", f"x{t}-ex", "k"),
     (403, "read access to exchange 'x{t}-ex' in vhost '/' refused for user '{u}'")),
    ("bind allowed, missing queue is 404",
     lambda ch, t: ch.queue_bind(f"w{t}-none", f"r{t}-ex", "k"),
     (404, "no queue 'w{t}-none' in vhost '/'")),
    ("unbind refused on the queue", lambda ch, t: ch.queue_unbind(f"x{t}-q", f"r{t}-ex", "k"),
     (403, "write access to queue 'x{t}-q' in vhost '/' refused for user '{u}'")),
    ("exchange bind: write destination, read source",
     lambda ch, t: ch.exchange_bind(f"w{t}-ex", f"r{t}-ex", "k"), None),
    ("exchange bind refused on the destination",
     lambda ch, t: ch.exchange_bind(f"x{t}-ex", f"r{t}-ex", "k"),
     (403, "write access to exchange 'x{t}-ex' in vhost '/' refused for user '{u}'")),
    ("exchange bind refused on the source",
     lambda ch, t: ch.exchange_bind(f"w{t}-ex", f"x{t}-ex", "k"),
     (403, "read access to exchange 'x{t}-ex' in vhost '/' refused for user '{u}'")),
    ("unbind refused on the exchange", lambda ch, t: ch.queue_unbind(f"w{t}-q", f"x{t}-ex", "k"),
     (403, "read access to exchange 'x{t}-ex' in vhost '/' refused for user '{u}'")),
    ("exchange unbind: write destination, read source",
     lambda ch, t: ch.exchange_unbind(f"w{t}-ex", f"r{t}-ex", "k"), None),
    ("exchange unbind refused on the destination",
     lambda ch, t: ch.exchange_unbind(f"x{t}-ex", f"r{t}-ex", "k"),
     (403, "write access to exchange 'x{t}-ex' in vhost '/' refused for user '{u}'")),
    ("exchange unbind refused on the source",
     lambda ch, t: ch.exchange_unbind(f"w{t}-ex", f"x{t}-ex", "k"),
     (403, "read access to exchange 'x{t}-ex' in vhost '/' refused for user '{u}'")),
    ("publish to the default exchange is amq.default",
     lambda ch, t: ch.basic_publish("", f"r{t}-q", b"x"),
     (403, "write access to exchange 'amq.default' in vhost '/' refused for user '{u}'")),
    ("publish refused", lambda ch, t: ch.basic_publish(f"x{t}-ex", "k", b"x"),
     (403, "write access to exchange 'x{t}-ex' in vhost '/' refused for user '{u}'")),
    ("publish to a missing exchange is checked first",
     lambda ch, t: ch.basic_publish(f"x{t}-none", "k", b"x"),
     (403, "write access to exchange 'x{t}-none' in vhost '/' refused for user '{u}'")),
    ("publish allowed", lambda ch, t: ch.basic_publish(f"w{t}-ex", "k", b"x"), None),
    ("get refused", lambda ch, t: ch.basic_get(f"x{t}-q"),
     (403, "read access to queue 'x{t}-q' in vhost '/' refused for user '{u}'")),
    ("get allowed", lambda ch, t: ch.basic_get(f"r{t}-q"), None),
    ("consume refused", lambda ch, t: ch.basic_consume(f"x{t}-q", lambda *a: None),
     (403, "read access to queue 'x{t}-q' in vhost '/' refused for user '{u}'")),
    ("consume allowed", lambda ch, t: ch.basic_consume(f"r{t}-q", lambda *a: None), None),
    ("purge refused", lambda ch, t: ch.queue_purge(f"x{t}-q"),
     (403, "read access to queue 'x{t}-q' in vhost '/' refused for user '{u}'")),
    ("purge allowed", lambda ch, t: ch.queue_purge(f"r{t}-q"), None),
    ("dead-letter exchange needs read on the queue",
     lambda ch, t: ch.queue_declare(f"c{t}-dlx", arguments={"x-dead-letter-exchange": f"w{t}-ex"}),
     (403, "read access to queue 'c{t}-dlx' in vhost '/' refused for user '{u}'")),
    ("alternate exchange needs read on the exchange",
     lambda ch, t: ch.exchange_declare(f"c{t}-ae", arguments={"alternate-exchange": f"w{t}-ex"}),
     (403, "read access to exchange 'c{t}-ae' in vhost '/' refused for user '{u}'")),
]


@pytest.fixture
def token(roost: RoostProcess) -> str:
    """A fresh token with its objects: queues x/w/r<T>-q, topic exchanges x/w/r<T>-ex."""
    t = os.urandom(4).hex()
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        for prefix in "xwr":
            ch.queue_declare(f"{prefix}{t}-q")
            ch.exchange_declare(f"{prefix}{t}-ex", "topic")
    return t


@pytest.mark.parametrize(("op", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_operation(
    roost: RoostProcess,
    make_user: MakeUser,
    token: str,
    op: Op,
    expected: tuple[int, str] | None,
) -> None:
    t = token
    user = make_user(f"^c{t}", f"^w{t}", f"^r{t}")
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        if expected is None:
            op(ch, t)
            sync(ch)
            assert ch.is_open
            return
        with pytest.raises(ChannelClosedByBroker) as err:
            op(ch, t)
            sync(ch)
        code, text = expected
        assert err.value.reply_code == code
        prefix = "ACCESS_REFUSED" if code == 403 else "NOT_FOUND"
        assert err.value.reply_text == f"{prefix} - " + text.format(t=t, u=user)
        # only the channel closed: the connection goes on
        assert conn.is_open
        conn.channel().queue_declare(f"x{t}-q", passive=True)


def test_server_named_queue_is_checked_under_its_generated_name(
    roost: RoostProcess, make_user: MakeUser
) -> None:
    user = make_user("^c", ".*", ".*")
    with amqp_as(roost, user) as conn, pytest.raises(ChannelClosedByBroker) as err:
        conn.channel().queue_declare("", exclusive=True)
    assert err.value.reply_code == 403
    assert err.value.reply_text.startswith("ACCESS_REFUSED - configure access to queue 'amq.gen-")
    assert err.value.reply_text.endswith(f"in vhost '/' refused for user '{user}'")


def test_empty_pattern_grants_nothing(roost: RoostProcess, make_user: MakeUser) -> None:
    user = make_user("", "", "")
    with amqp_as(roost, user) as conn, pytest.raises(ChannelClosedByBroker) as err:
        conn.channel().queue_declare("anything")
    assert err.value.reply_code == 403


def test_permission_change_applies_to_open_connections(
    roost: RoostProcess, make_user: MakeUser, admin: httpx.Client
) -> None:
    """Answers are cached per connection; a change through the API must reset them."""
    user = make_user(".*", ".*", ".*")
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        ch.basic_publish("amq.fanout", "", b"allowed")
        sync(ch)
        reply = admin.put(
            f"/permissions/%2F/{user}", json={"configure": ".*", "write": "^$", "read": ".*"}
        )
        assert reply.status_code == 204
        with pytest.raises(ChannelClosedByBroker) as err:
            ch.basic_publish("amq.fanout", "", b"refused now")
            sync(ch)
        assert err.value.reply_code == 403


def test_transactional_publish_is_checked_when_it_arrives(
    roost: RoostProcess, make_user: MakeUser
) -> None:
    user = make_user(".*", "^allowed$", ".*")
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        ch.tx_select()
        with pytest.raises(ChannelClosedByBroker) as err:
            ch.basic_publish("amq.fanout", "", b"x")
            ch.tx_commit()
        assert err.value.reply_code == 403
        assert "access to exchange 'amq.fanout'" in err.value.reply_text


def test_no_permissions_in_vhost_refuses_the_connection(
    roost: RoostProcess, admin: httpx.Client
) -> None:
    name = f"noperm-{os.urandom(3).hex()}"
    assert admin.put(f"/users/{name}", json={"password": "pw", "tags": ""}).status_code == 201
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as err:
        amqp_as(roost, name)
    assert "access to vhost '/' refused for user" in str(err.value)
