"""Permission checks on the management API's operations: each refused one answers 403 with
RabbitMQ's JSON shape (``{"error": "not_authorised", "reason": …}``) and a reason naming the
permission and the resource, and changes nothing; a wrong password is 401.

A management user may configure names starting ``c<T>``, write ``w<T>`` (and amq.topic)
and read ``r<T>``; ``x<T>`` names are outside every permission. Its topic permission on
amq.topic lets it publish routing keys starting ``ok.``. RabbitMQ 3.10.8 answers these
refusals with 401 and a bare "Access refused." (and a refused topic key on publish with
400); Roost answers 403, as for a missing tag (http/auth.py), with the text AMQP gets.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.http.conftest import client, json_of
from tests.support import RoostProcess

PUBLISH = {"payload": "x", "payload_encoding": "string", "properties": {}}

# (id, method, path, body, expected status, the reason's permission and resource or None)
CASES: list[tuple[str, str, str, dict[str, Any] | None, int, str | None]] = [
    ("delete queue", "DELETE", "/api/queues/%2F/x{t}-q", None, 403,
     "configure access to queue 'x{t}-q'"),
    ("delete exchange", "DELETE", "/api/exchanges/%2F/x{t}-ex", None, 403,
     "configure access to exchange 'x{t}-ex'"),
    ("declare exchange", "PUT", "/api/exchanges/%2F/x{t}-new", {"type": "direct"}, 403,
     "configure access to exchange 'x{t}-new'"),
    ("declare exchange allowed", "PUT", "/api/exchanges/%2F/c{t}-new", {"type": "direct"}, 201,
     None),
    ("bind: write on the queue", "POST", "/api/bindings/%2F/e/r{t}-ex/q/x{t}-q",
     {"routing_key": "k"}, 403, "write access to queue 'x{t}-q'"),
    ("bind: read on the exchange", "POST", "/api/bindings/%2F/e/x{t}-ex/q/w{t}-q",
     {"routing_key": "k"}, 403, "read access to exchange 'x{t}-ex'"),
    ("bind allowed", "POST", "/api/bindings/%2F/e/r{t}-ex/q/w{t}-q", {"routing_key": "k"}, 201,
     None),
    ("exchange bind: write on the destination", "POST", "/api/bindings/%2F/e/r{t}-ex/e/x{t}-ex",
     {"routing_key": "k"}, 403, "write access to exchange 'x{t}-ex'"),
    ("exchange bind: read on the source", "POST", "/api/bindings/%2F/e/x{t}-ex/e/w{t}-ex",
     {"routing_key": "k"}, 403, "read access to exchange 'x{t}-ex'"),
    ("unbind: write on the queue", "DELETE", "/api/bindings/%2F/e/r{t}-ex/q/x{t}-q/k", None, 403,
     "write access to queue 'x{t}-q'"),
    ("unbind: read on the exchange", "DELETE", "/api/bindings/%2F/e/x{t}-ex/q/w{t}-q/k", None,
     403, "read access to exchange 'x{t}-ex'"),
    ("unbind allowed", "DELETE", "/api/bindings/%2F/e/r{t}-ex/q/w{t}-q/k", None, 204, None),
    ("get messages", "POST", "/api/queues/%2F/x{t}-q/get",
     {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}, 403,
     "read access to queue 'x{t}-q'"),
    ("get messages allowed", "POST", "/api/queues/%2F/r{t}-q/get",
     {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}, 200, None),
    ("purge", "DELETE", "/api/queues/%2F/x{t}-q/contents", None, 403,
     "read access to queue 'x{t}-q'"),
    ("publish: write on the exchange", "POST", "/api/exchanges/%2F/x{t}-ex/publish",
     {**PUBLISH, "routing_key": "k"}, 403, "write access to exchange 'x{t}-ex'"),
    ("publish with a refused topic key", "POST", "/api/exchanges/%2F/amq.topic/publish",
     {**PUBLISH, "routing_key": "bad.key"}, 403,
     "write access to topic 'bad.key' in exchange 'amq.topic'"),
    ("publish with an allowed topic key", "POST", "/api/exchanges/%2F/amq.topic/publish",
     {**PUBLISH, "routing_key": "ok.key"}, 200, None),
]


@pytest.fixture
def t(http: httpx.Client) -> str:
    """A token and its objects: queues and topic exchanges x/w/r<T>, and bindings
    x-ex -> w-q, r-ex -> x-q and r-ex -> w-q with key k (made by the administrator)."""
    token = os.urandom(4).hex()
    for prefix in "xwr":
        assert http.put(f"/api/queues/%2F/{prefix}{token}-q", json={}).status_code == 201
        made = http.put(f"/api/exchanges/%2F/{prefix}{token}-ex", json={"type": "topic"})
        assert made.status_code == 201
    for source, dest in (("x", "w"), ("r", "x"), ("r", "w")):
        bound = http.post(
            f"/api/bindings/%2F/e/{source}{token}-ex/q/{dest}{token}-q", json={"routing_key": "k"}
        )
        assert bound.status_code == 201
    return token


@pytest.fixture
def limited(
    http: httpx.Client, make_user: Callable[..., tuple[str, str]], t: str
) -> tuple[str, str]:
    user, password = make_user("management")
    perms = {"configure": f"^c{t}", "write": f"^(w{t}|amq\\.topic$)", "read": f"^r{t}"}
    assert http.put(f"/api/permissions/%2F/{user}", json=perms).status_code == 204
    topic = {"exchange": "amq.topic", "write": "^ok\\.", "read": ".*"}
    assert http.put(f"/api/topic-permissions/%2F/{user}", json=topic).status_code == 201
    return user, password


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "refused"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_operation(
    mgmt: RoostProcess,
    limited: tuple[str, str],
    t: str,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    status: int,
    refused: str | None,
) -> None:
    user = limited[0]
    with client(mgmt, *limited) as c:
        reply = c.request(method, path.format(t=t), json=body)
    assert reply.status_code == status, reply.text
    if refused is not None:
        assert reply.json() == {
            "error": "not_authorised",
            "reason": f"ACCESS_REFUSED - {refused.format(t=t)} in vhost '/' "
            f"refused for user '{user}'",
        }


def test_refused_operations_change_nothing(
    mgmt: RoostProcess, http: httpx.Client, limited: tuple[str, str], t: str
) -> None:
    http.post(
        "/api/exchanges/%2F/amq.default/publish",
        json={**PUBLISH, "routing_key": f"x{t}-q"},
    )
    with client(mgmt, *limited) as c:
        assert c.delete(f"/api/queues/%2F/x{t}-q").status_code == 403
        assert c.delete(f"/api/queues/%2F/x{t}-q/contents").status_code == 403
        assert c.delete(f"/api/exchanges/%2F/x{t}-ex").status_code == 403
        assert c.delete(f"/api/bindings/%2F/e/x{t}-ex/q/w{t}-q/k").status_code == 403
    assert json_of(http.get(f"/api/queues/%2F/x{t}-q"))["messages"] == 1
    assert http.get(f"/api/exchanges/%2F/x{t}-ex").status_code == 200
    assert json_of(http.get(f"/api/bindings/%2F/e/x{t}-ex/q/w{t}-q")) != []


def test_publish_with_a_foreign_user_id_is_400(
    mgmt: RoostProcess, limited: tuple[str, str], t: str
) -> None:
    """RabbitMQ's 400 with its PRECONDITION_FAILED text (the channel's 406 on AMQP)."""
    user = limited[0]
    body = {**PUBLISH, "routing_key": "k", "properties": {"user_id": "someone-else"}}
    with client(mgmt, *limited) as c:
        reply = c.post(f"/api/exchanges/%2F/w{t}-ex/publish", json=body)
        assert reply.status_code == 400
        assert reply.json() == {
            "error": "bad_request",
            "reason": f"user_id property set to 'someone-else' but authenticated user was "
            f"'{user}'",
        }
        mine = {**body, "properties": {"user_id": user}}
        assert json_of(c.post(f"/api/exchanges/%2F/w{t}-ex/publish", json=mine)) == {
            "routed": False
        }


def test_wrong_password_is_401_and_changes_nothing(
    mgmt: RoostProcess, http: httpx.Client, limited: tuple[str, str], t: str
) -> None:
    user = limited[0]
    with client(mgmt, user, "wrong") as c:
        for method, path in (
            ("DELETE", f"/api/queues/%2F/r{t}-q"),
            ("DELETE", f"/api/queues/%2F/r{t}-q/contents"),
            ("PUT", f"/api/exchanges/%2F/c{t}-other"),
        ):
            reply = c.request(method, path, json={} if method == "PUT" else None)
            assert reply.status_code == 401, path
            assert reply.json() == {"error": "not_authorized", "reason": "Login failed"}
    assert http.get(f"/api/queues/%2F/r{t}-q").status_code == 200
    assert http.get(f"/api/exchanges/%2F/c{t}-other").status_code == 404
