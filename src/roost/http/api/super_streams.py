"""/api/stream/super-streams: a super stream declared and deleted in one call (what
``rabbitmq-streams add_super_stream`` does on RabbitMQ; the path is Roost's): a durable
direct exchange marked ``x-super-stream``, one stream per partition, each bound with its
routing key and ``x-stream-partition-order``, exactly as the stream protocol's
CreateSuperStream declares them. Body: ``partitions`` (N: streams NAME-0 .. NAME-N-1,
keys "0" .. "N-1") or ``binding_keys`` (a list or comma-separated: streams NAME-KEY),
and ``arguments`` for every partition stream (x-max-length-bytes, x-max-age, ...)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.http.auth import check_vhost_write
from roost.http.keys import management, user
from roost.http.routes import INT, MAP, Route, obj
from roost.http.util import MANAGEMENT, access, bad_request, get_dict, read_json

MAX_PARTITIONS = 1000


def _keys(body: dict[str, Any]) -> list[str]:
    """The partitions' routing keys from ``partitions`` or ``binding_keys``."""
    keys = body.get("binding_keys")
    count = body.get("partitions")
    if (keys is None) == (count is None):
        raise bad_request("give either partitions or binding_keys")
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or not (
            1 <= count <= MAX_PARTITIONS
        ):
            raise bad_request(f"partitions must be an integer from 1 to {MAX_PARTITIONS}")
        return [str(i) for i in range(count)]
    if isinstance(keys, str):
        keys = [k.strip() for k in keys.split(",")]
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
        raise bad_request("binding_keys must be a non-empty list of non-empty strings")
    if len(set(keys)) != len(keys) or len(keys) > MAX_PARTITIONS:
        raise bad_request(f"binding_keys must be distinct, at most {MAX_PARTITIONS}")
    return list(keys)


@access(MANAGEMENT)
async def put_super_stream(request: web.Request) -> web.Response:
    b, me = management(request), user(request)
    vhost, name = request.match_info["vhost"], request.match_info["name"]
    check_vhost_write(b, me, vhost)
    body = await read_json(request)
    keys = _keys(body)
    arguments = {**get_dict(body, "arguments"), "x-queue-type": "stream"}
    ops = b.operations
    made = ops.mgmt_declare_exchange(
        me.name, vhost, name, "direct", durable=True, arguments={"x-super-stream": True}
    )
    for order, key in enumerate(keys):
        stream = f"{name}-{key}"
        ops.mgmt_declare_queue(me.name, vhost, stream, durable=True, arguments=dict(arguments))
        ops.mgmt_bind(
            me.name, vhost, name, "queue", stream, key, {"x-stream-partition-order": order}
        )
    return web.Response(status=201 if made else 204)


@access(MANAGEMENT)
async def delete_super_stream(request: web.Request) -> web.Response:
    """The exchange and every stream bound to it as a partition."""
    b, me = management(request), user(request)
    vhost, name = request.match_info["vhost"], request.match_info["name"]
    check_vhost_write(b, me, vhost)
    b.queries.exchange_info(vhost, name)  # 404 when there is none
    partitions = [
        binding.destination
        for binding in b.queries.list_bindings(vhost, source=name, destination_type="queue")
        if "x-stream-partition-order" in binding.arguments
    ]
    b.operations.mgmt_delete_exchange(me.name, vhost, name)
    for stream in partitions:
        b.operations.mgmt_delete_queue(me.name, vhost, stream)
    return web.Response(status=204)


SUPER_STREAM_BODY = obj({"partitions": INT, "binding_keys": {}, "arguments": MAP})
S = "/api/stream/super-streams/{vhost}/{name}"
ROUTES = [
    Route("PUT", S, put_super_stream, "Declare a super stream and its partitions",
          body=SUPER_STREAM_BODY),
    Route("DELETE", S, delete_super_stream, "Delete a super stream and its partitions"),
]
