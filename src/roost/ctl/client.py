"""A small synchronous client for the management API (stdlib only)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urlencode


class CtlError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}" if status else reason)
        self.status = status
        self.reason = reason


def seg(value: str) -> str:
    """One path segment: '/' becomes %2F, as the API expects for vhost '/'."""
    return quote(value, safe="")


class ApiClient:
    def __init__(self, url: str, user: str, password: str, timeout: float = 30.0) -> None:
        self.base = url.rstrip("/")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        # */* too: RabbitMQ answers 406 to a PUT /api/vhost-limits that accepts JSON only
        self.headers = {"Authorization": f"Basic {token}", "Accept": "application/json, */*;q=0.1"}
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        url = self.base + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode("utf-8")
        all_headers = dict(self.headers, **(headers or {}))
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise CtlError(exc.code, _reason(exc.read())) from None
        except urllib.error.URLError as exc:
            raise CtlError(0, f"cannot reach {self.base}: {exc.reason}") from None
        return json.loads(raw) if raw.strip() else None

    def download(self, method: str, path: str, query: dict[str, Any]) -> tuple[bytes, str]:
        """A file the API answers with: its bytes and the name it suggests."""
        url = self.base + path + f"?{urlencode(query)}"
        req = urllib.request.Request(url, data=b"", method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                disposition = resp.headers.get("Content-Disposition", "")
                name = disposition.partition('filename="')[2].rstrip('"') or "download"
                return resp.read(), name
        except urllib.error.HTTPError as exc:
            raise CtlError(exc.code, _reason(exc.read())) from None
        except urllib.error.URLError as exc:
            raise CtlError(0, f"cannot reach {self.base}: {exc.reason}") from None

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except CtlError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query or None)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def post(self, path: str, body: Any, **query: Any) -> Any:
        return self.request("POST", path, body, query=query or None)

    def delete(self, path: str, headers: dict[str, str] | None = None) -> Any:
        return self.request("DELETE", path, headers=headers)


def _reason(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip() or "no reason given"
    if isinstance(body, dict):
        return str(body.get("reason") or body.get("error") or body)
    return str(body)
