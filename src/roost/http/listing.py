"""Listing parameters of RabbitMQ's API: name filter, sort, pagination and columns.

Applied to already serialized items, in RabbitMQ's order: filter by name, sort, page,
then keep only the requested columns (dotted paths such as ``message_stats.publish``).
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from roost.http.util import HTTPProblem, bad_request

MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 100
LISTING_PARAMS = ("page", "page_size", "name", "use_regex", "sort", "sort_reverse", "columns")


def _lookup(item: dict[str, Any], path: str) -> Any:
    value: Any = item
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _sort_key(value: Any) -> tuple[int, Any]:
    # missing values first, then numbers, then text: mixed types never compare directly
    if value is None:
        return (0, 0)
    if isinstance(value, bool | int | float):
        return (1, value)
    return (2, str(value))


def _positive(request: web.Request, key: str, default: int) -> int:
    raw = request.query.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise bad_request("Pagination parameters are invalid") from None


def _columns(items: list[dict[str, Any]], columns: str) -> list[dict[str, Any]]:
    paths = [c.strip() for c in columns.split(",") if c.strip()]
    out = []
    for item in items:
        kept: dict[str, Any] = {}
        for path in paths:
            if not _has(item, path):
                continue
            value = _lookup(item, path)
            target = kept
            parts = path.split(".")
            for part in parts[:-1]:
                target = target.setdefault(part, {})
            target[parts[-1]] = value
        out.append(kept)
    return out


def _has(item: dict[str, Any], path: str) -> bool:
    value: Any = item
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def listing(request: web.Request, items: list[dict[str, Any]]) -> web.Response:
    """Answer a list endpoint, honouring every listing parameter."""
    query = request.query
    total = len(items)
    name = query.get("name")
    if name:
        if query.get("use_regex", "false").lower() == "true":
            try:
                pattern = re.compile(name)
            except re.error as exc:
                raise bad_request(f"invalid regular expression '{name}': {exc}") from None
            items = [i for i in items if pattern.search(str(i.get("name", "")))]
        else:
            needle = name.lower()
            items = [i for i in items if needle in str(i.get("name", "")).lower()]
    sort = query.get("sort")
    reverse = query.get("sort_reverse", "false").lower() == "true"
    if sort:
        items = sorted(items, key=lambda i: _sort_key(_lookup(i, sort)), reverse=reverse)
    elif reverse:
        items = list(reversed(items))
    columns = query.get("columns")
    if "page" not in query and "page_size" not in query:
        return web.json_response(_columns(items, columns) if columns else items)
    page = _positive(request, "page", 1)
    size = _positive(request, "page_size", DEFAULT_PAGE_SIZE)
    if page < 1 or not 1 <= size <= MAX_PAGE_SIZE:
        raise HTTPProblem(
            400,
            "invalid_pagination_parameters",
            f"Invalid pagination parameters: page number {page}, page size {size}",
        )
    filtered = len(items)
    page_count = max(1, -(-filtered // size))
    if page > page_count:
        raise HTTPProblem(
            400,
            "page_out_of_range",
            f"Page out of range, page: {page} page size: {size}, len: {filtered}",
        )
    chunk = items[(page - 1) * size : page * size]
    return web.json_response(
        {
            "filtered_count": filtered,
            "item_count": len(chunk),
            "items": _columns(chunk, columns) if columns else chunk,
            "page": page,
            "page_count": page_count,
            "page_size": size,
            "total_count": total,
        }
    )
