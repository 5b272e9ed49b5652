"""What every handler shares: JSON bodies, typed fields, error responses, rate details."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from roost.core.info import Rates, Sample
from roost.http.keys import SETTINGS

T = TypeVar("T")
Handler = Callable[[web.Request], Any]

# access levels, from least to most; a route declares the one it needs
PUBLIC, MANAGEMENT, POLICYMAKER, MONITORING, ADMINISTRATOR = (
    "public",
    "management",
    "policymaker",
    "monitoring",
    "administrator",
)


class HTTPProblem(Exception):
    """An error answered as RabbitMQ does: ``{"error": …, "reason": …}`` with a status."""

    def __init__(self, status: int, error: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.error = error
        self.reason = reason


def bad_request(reason: str) -> HTTPProblem:
    return HTTPProblem(400, "bad_request", reason)


def forbidden(reason: str) -> HTTPProblem:
    return HTTPProblem(403, "not_authorised", reason)


def problem_response(p: HTTPProblem, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(
        {"error": p.error, "reason": p.reason}, status=p.status, headers=headers
    )


def access(level: str) -> Callable[[T], T]:
    """Mark a handler with the user tag it needs; the auth middleware enforces it."""

    def mark(handler: T) -> T:
        handler.roost_access = level  # type: ignore[attr-defined]
        return handler

    return mark


async def read_json(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object; an empty body counts as ``{}``. A body that does not
    arrive within the settings' ``body_timeout`` (a client sending it a byte at a time)
    is answered 408; aiohttp then closes the connection, as it does for any request whose
    body was not read to its end."""
    try:
        raw = await asyncio.wait_for(request.read(), request.app[SETTINGS].body_timeout)
    except TimeoutError:
        raise HTTPProblem(408, "request_timeout", "request body not received in time") from None
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise bad_request("not_json") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


def get_bool(body: dict[str, Any], key: str, default: bool) -> bool:
    """Booleans as JSON or as the strings rabbitmqadmin sends ("true"/"false")."""
    value = body.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise bad_request(f"{key} must be true or false")


def get_int(body: dict[str, Any], key: str, default: int | None = None, *, low: int = 0) -> int:
    value = body.get(key, default)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"{key} must be an integer")
    if value < low:
        raise bad_request(f"{key} must be at least {low}")
    return value


def get_str(body: dict[str, Any], key: str, default: str | None = None) -> str:
    value = body.get(key, default)
    if not isinstance(value, str):
        raise bad_request(f"{key} must be a string" if key in body else f"{key} is missing")
    return value


def get_dict(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(f"{key} must be an object")
    return value


def query_bool(request: web.Request, key: str) -> bool:
    return request.query.get(key, "false").lower() == "true"


def details(rates: Rates, name: str) -> dict[str, float]:
    return {"rate": rates.get(name)}


def with_samples(rate: float, samples: tuple[Sample, ...]) -> dict[str, Any]:
    """RabbitMQ's ``*_details`` with history: newest sample first."""
    out: dict[str, Any] = {"rate": rate}
    if samples:
        out["samples"] = [{"sample": s.value, "timestamp": s.timestamp} for s in reversed(samples)]
        first, last = samples[0], samples[-1]
        span = (last.timestamp - first.timestamp) / 1000
        out["avg_rate"] = round((last.value - first.value) / span, 2) if span > 0 else 0.0
        out["avg"] = round(sum(s.value for s in samples) / len(samples), 2)
    return out


def created(was_created: bool) -> web.Response:
    return web.Response(status=201 if was_created else 204)


NO_CONTENT = 204


def not_found(reason: str = "Not Found") -> HTTPProblem:
    return HTTPProblem(404, "Object Not Found", reason)
