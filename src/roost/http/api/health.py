"""Health checks (``/api/health/checks/…``, the older ``/api/healthchecks/node``) and
``/api/aliveness-test/{vhost}``.

A passing check answers 200 ``{"status": "ok"}``; a failing one 503 with a reason, so a
load balancer or Kubernetes probe can use the status code alone.
"""

from __future__ import annotations

from aiohttp import web

from roost.http import serialize
from roost.http.auth import check_vhost_write
from roost.http.keys import management, user
from roost.http.routes import Route
from roost.http.util import MANAGEMENT, MONITORING, access, bad_request, not_found

OK = {"status": "ok"}


def failed(reason: str, **extra: object) -> web.Response:
    return web.json_response({"status": "failed", "reason": reason, **extra}, status=503)


# RabbitMQ names the disk alarm's resource "disk space" in these answers
ALARM_RESOURCES = {"memory": "memory", "disk": "disk space"}


def _alarms(request: web.Request, where: str) -> web.Response:
    active = management(request).activity.alarms()
    if active:
        return failed(
            f"There are alarms in effect {where}",
            alarms=[
                {"node": serialize.NODE, "resource": ALARM_RESOURCES.get(a, a)} for a in active
            ],
        )
    return web.json_response(OK)


@access(MONITORING)
async def alarms(request: web.Request) -> web.Response:
    return _alarms(request, "in the cluster")


@access(MONITORING)
async def local_alarms(request: web.Request) -> web.Response:
    return _alarms(request, "on the node")


@access(MONITORING)
async def virtual_hosts(request: web.Request) -> web.Response:
    return web.json_response(OK)  # every vhost runs in this process: up while we answer


@access(MONITORING)
async def port_listener(request: web.Request) -> web.Response:
    raw = request.match_info["port"]
    if not raw.isdigit():
        raise bad_request(f"invalid port '{raw}'")
    ports = [li.port for li in management(request).activity.listeners]
    if int(raw) in ports:
        return web.json_response({**OK, "port": int(raw)})
    return failed(f"no active listener on port {raw}", missing=int(raw), ports=ports)


@access(MONITORING)
async def protocol_listener(request: web.Request) -> web.Response:
    proto = request.match_info["protocol"].lower()
    protocols = sorted({li.protocol for li in management(request).activity.listeners})
    if proto in protocols or proto.replace("-", "") in protocols:
        return web.json_response({**OK, "protocol": proto})
    return failed(f"no active listener for protocol {proto}", protocols=protocols)


@access(MANAGEMENT)
async def node(request: web.Request) -> web.Response:
    """RabbitMQ 3.10's node health check (deprecated there, still used by amqpstorm's
    ``healthchecks.get``): ok while the node answers; another node's name is 404."""
    name = request.match_info.get("node")
    if name and name != serialize.NODE:
        raise not_found()
    return web.json_response(OK)


@access(MANAGEMENT)
async def aliveness(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info["vhost"]
    check_vhost_write(b, me, vhost)
    b.operations.aliveness_test(me.name, vhost)
    return web.json_response(OK)


H = "/api/health/checks"
ROUTES = [
    Route("GET", H + "/alarms", alarms, "Fails while a memory or disk alarm is on"),
    Route("GET", H + "/local-alarms", local_alarms, "Same as alarms (one node)"),
    Route("GET", H + "/virtual-hosts", virtual_hosts, "Every vhost is running"),
    Route("GET", H + "/port-listener/{port}", port_listener, "Something listens on the port"),
    Route(
        "GET",
        H + "/protocol-listener/{protocol}",
        protocol_listener,
        "Something serves the protocol (amqp, http, …)",
    ),
    Route("GET", "/api/healthchecks/node", node, "The node is running (RabbitMQ 3.10's check)"),
    Route("GET", "/api/healthchecks/node/", node, "Same as /api/healthchecks/node"),
    Route("GET", "/api/healthchecks/node/{node}", node, "The named node (this one) is running"),
    Route(
        "GET",
        "/api/aliveness-test/{vhost}",
        aliveness,
        "Declare a queue, publish and get a message back",
    ),
]
