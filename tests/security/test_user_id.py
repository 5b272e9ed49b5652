"""The user-id property: a publisher may only claim its own name (406 PRECONDITION_FAILED
with RabbitMQ's text), unless it is tagged ``impersonator``."""

from __future__ import annotations

import httpx
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from tests.security.conftest import MakeUser, amqp_as, sync
from tests.stomp.conftest import Connect, connect  # noqa: F401 (fixture)
from tests.support import RoostProcess


def test_own_user_id_is_accepted_and_delivered(
    roost: RoostProcess, make_user: MakeUser, qname: str
) -> None:
    user = make_user()
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        ch.queue_declare(qname, exclusive=True)
        ch.basic_publish("", qname, b"x", pika.BasicProperties(user_id=user))
        _, props, _ = ch.basic_get(qname, auto_ack=True)
        assert props.user_id == user


def test_another_users_id_is_refused(roost: RoostProcess, make_user: MakeUser) -> None:
    user = make_user()
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        with pytest.raises(ChannelClosedByBroker) as err:
            ch.basic_publish("amq.fanout", "", b"x", pika.BasicProperties(user_id="guest"))
            sync(ch)
        assert err.value.reply_code == 406
        assert err.value.reply_text == (
            "PRECONDITION_FAILED - user_id property set to 'guest' but authenticated user "
            f"was '{user}'"
        )
        assert conn.is_open


def test_impersonator_may_claim_any_id(
    roost: RoostProcess, make_user: MakeUser, qname: str
) -> None:
    user = make_user(tags="impersonator")
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        ch.queue_declare(qname, exclusive=True)
        ch.basic_publish("", qname, b"x", pika.BasicProperties(user_id="someone"))
        _, props, _ = ch.basic_get(qname, auto_ack=True)
        assert props.user_id == "someone"


def test_stomp_user_id_header_is_checked(
    connect: Connect, make_user: MakeUser  # noqa: F811
) -> None:
    user = make_user()
    conn, inbox = connect(username=user, passcode="pw")
    conn.send("/topic/uid", "x", headers={"user-id": "guest"})
    err = inbox.errors.get(timeout=5)
    assert err.headers["message"] == "precondition_failed"
    assert err.body == (
        f"PRECONDITION_FAILED - user_id property set to 'guest' but authenticated user was "
        f"'{user}'"
    )


def test_impersonator_tag_applies_to_open_connections(
    roost: RoostProcess, make_user: MakeUser, admin: httpx.Client
) -> None:
    user = make_user()
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        assert admin.put(f"/users/{user}", json={"tags": "impersonator"}).status_code == 204
        ch.basic_publish("amq.fanout", "", b"x", pika.BasicProperties(user_id="someone"))
        sync(ch)
        assert ch.is_open
