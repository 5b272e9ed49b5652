"""/api/queues: list (all, per vhost), get, PUT declare, DELETE, purge, get messages,
bindings."""

from __future__ import annotations

import base64

from aiohttp import web

from roost.core.info import FetchedMessage
from roost.http import serialize as ser
from roost.http.auth import check_vhost, check_vhost_write, visible
from roost.http.cluster import gather_queues, home_queue, post_to_home
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import BOOL, INT, MAP, STR, Route, obj
from roost.http.util import (
    MANAGEMENT,
    access,
    bad_request,
    created,
    get_bool,
    get_dict,
    get_int,
    get_str,
    query_bool,
    read_json,
)

MAX_GET = 10_000  # messages one "get messages" call may take


@access(MANAGEMENT)
async def list_queues(request: web.Request) -> web.Response:
    b, me = management(request), user(request)
    vhost = request.match_info.get("vhost")
    if vhost is not None:
        check_vhost(b, me, vhost)
    found = b.queries.list_queues(vhost)
    own = [ser.queue(q) for q in found if visible(b, me, q.vhost)]
    return listing(request, await gather_queues(request, own))


@access(MANAGEMENT)
async def get_queue(request: web.Request) -> web.Response:
    b, vhost, name = management(request), request.match_info["vhost"], request.match_info["name"]
    check_vhost(b, user(request), vhost)
    info = b.queries.queue_info(vhost, name)
    if info.node and info.state != "down":  # its figures are on its home node
        found = await home_queue(request, info.node)
        if found is not None:
            return web.json_response(found)
    consumers = [c for c in b.activity.list_consumers(vhost) if c.queue == name]
    return web.json_response(ser.queue(info, consumers=consumers))


@access(MANAGEMENT)
async def put_queue(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info["vhost"]
    check_vhost_write(b, me, vhost)
    body = await read_json(request)
    arguments = get_dict(body, "arguments")
    if "type" in body:  # RabbitMQ 3.10 accepts the queue type at the top level too
        arguments.setdefault("x-queue-type", get_str(body, "type"))
    made = b.operations.mgmt_declare_queue(
        me.name,
        vhost,
        request.match_info["name"],
        durable=get_bool(body, "durable", True),
        auto_delete=get_bool(body, "auto_delete", False),
        arguments=arguments,
    )
    return created(made)


@access(MANAGEMENT)
async def delete_queue(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info["vhost"]
    check_vhost_write(b, me, vhost)
    b.operations.mgmt_delete_queue(
        me.name,
        vhost,
        request.match_info["name"],
        if_unused=query_bool(request, "if-unused"),
        if_empty=query_bool(request, "if-empty"),
    )
    return web.Response(status=204)


@access(MANAGEMENT)
async def purge(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info["vhost"]
    check_vhost_write(b, me, vhost)
    b.operations.mgmt_purge_queue(me.name, vhost, request.match_info["name"])
    return web.Response(status=204)


def message_json(m: FetchedMessage, encoding: str, truncate: int | None) -> dict[str, object]:
    body = m.body if truncate is None else m.body[:truncate]
    payload: str
    if encoding == "auto":
        try:
            payload, kind = body.decode("utf-8"), "string"
        except UnicodeDecodeError:
            payload, kind = base64.b64encode(body).decode("ascii"), "base64"
    else:
        payload, kind = base64.b64encode(body).decode("ascii"), "base64"
    return {
        "payload_bytes": len(m.body),
        "redelivered": m.redelivered,
        "exchange": m.exchange,
        "routing_key": m.routing_key,
        "message_count": m.message_count,
        "properties": ser.jsonable(m.properties),
        "payload": payload,
        "payload_encoding": kind,
    }


@access(MANAGEMENT)
async def get_messages(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info["vhost"]
    check_vhost_write(b, me, vhost)
    body = await read_json(request)
    missing = [k for k in ("count", "ackmode", "encoding") if k not in body]
    if missing:
        raise bad_request(f"{', '.join(missing)} missing")
    count = get_int(body, "count", low=1)
    if count > MAX_GET:
        raise bad_request(f"count must be at most {MAX_GET}")
    encoding = get_str(body, "encoding")
    if encoding not in ("auto", "base64"):
        raise bad_request("encoding must be auto or base64")
    truncate = get_int(body, "truncate", low=0) if body.get("truncate") is not None else None
    home = b.queries.queue_info(vhost, request.match_info["name"]).node
    if home:  # a cluster's queue homed on another node: its messages are there
        answer = await post_to_home(request, home, body)
        if answer is not None:
            return answer
    got = b.operations.mgmt_get_messages(
        me.name, vhost, request.match_info["name"], count=count, ackmode=get_str(body, "ackmode")
    )
    return web.json_response([message_json(m, encoding, truncate) for m in got])


@access(MANAGEMENT)
async def producer(request: web.Request) -> web.Response:
    """A stream producer's last publishing id: what a restarted producer resumes after
    (null when the stream knows no such producer)."""
    b, me, vhost = management(request), user(request), request.match_info["vhost"]
    check_vhost(b, me, vhost)
    name, producer_name = request.match_info["name"], request.match_info["producer"]
    found = b.operations.mgmt_last_publishing_id(me.name, vhost, name, producer_name)
    return web.json_response(
        {"vhost": vhost, "stream": name, "producer": producer_name, "publishing_id": found}
    )


@access(MANAGEMENT)
async def queue_bindings(request: web.Request) -> web.Response:
    b, vhost, name = management(request), request.match_info["vhost"], request.match_info["name"]
    check_vhost(b, user(request), vhost)
    found = b.queries.list_bindings(vhost, destination=name, destination_type="queue")
    return listing(request, [ser.binding(x) for x in found])


QUEUE_BODY = obj({"durable": BOOL, "auto_delete": BOOL, "arguments": MAP, "type": STR})
GET_BODY = obj(
    {"count": INT, "ackmode": STR, "encoding": STR, "truncate": INT},
    ("count", "ackmode", "encoding"),
)
Q = "/api/queues/{vhost}/{name}"
ROUTES = [
    Route("GET", "/api/queues", list_queues, "Every queue", listing=True),
    Route("GET", "/api/queues/{vhost}", list_queues, "A vhost's queues", listing=True),
    Route("GET", Q, get_queue, "One queue, with its consumers"),
    Route("PUT", Q, put_queue, "Declare a queue", body=QUEUE_BODY),
    Route("DELETE", Q, delete_queue, "Delete a queue", query=("if-unused", "if-empty")),
    Route("DELETE", Q + "/contents", purge, "Purge a queue"),
    Route("POST", Q + "/get", get_messages, "Get (and ack or requeue) messages", body=GET_BODY),
    Route("GET", Q + "/bindings", queue_bindings, "Bindings to a queue", listing=True),
    Route("GET", Q + "/producers/{producer}", producer, "A stream producer's last publishing id"),
]
