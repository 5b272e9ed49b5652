"""The route table: each API module lists its routes once; the app and the OpenAPI
document are both built from these lists."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roost.http.util import Handler


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    body: dict[str, Any] | None = None  # JSON schema of the request body, if any
    query: tuple[str, ...] = ()  # extra query parameters
    listing: bool = False  # accepts page, page_size, name, use_regex, sort, columns
    tags: tuple[str, ...] = field(default_factory=tuple)


def obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON schema for an object body (extra keys allowed, as RabbitMQ allows them)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


STR = {"type": "string"}
BOOL = {"type": "boolean"}
INT = {"type": "integer"}
MAP = {"type": "object"}
TAGS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
