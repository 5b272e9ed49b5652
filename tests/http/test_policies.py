"""/api/policies: stored, listed, matched to queues (``policy`` in queue JSON)."""

from __future__ import annotations

import httpx

from tests.http.conftest import json_of


def test_policy_lifecycle(http: httpx.Client, name: str) -> None:
    body = {
        "pattern": f"^{name}",
        "definition": {"max-length": 5},
        "priority": 3,
        "apply-to": "queues",
    }
    assert http.put(f"/api/policies/%2F/{name}", json=body).status_code == 201
    assert http.put(f"/api/policies/%2F/{name}", json=body).status_code == 204
    p = json_of(http.get(f"/api/policies/%2F/{name}"))
    assert p == {
        "vhost": "/",
        "name": name,
        "pattern": f"^{name}",
        "apply-to": "queues",
        "definition": {"max-length": 5},
        "priority": 3,
    }
    assert p in json_of(http.get("/api/policies")) and p in json_of(http.get("/api/policies/%2F"))
    http.put(f"/api/queues/%2F/{name}.q", json={})
    q = json_of(http.get(f"/api/queues/%2F/{name}.q"))
    assert q["policy"] == name and q["effective_policy_definition"] == {"max-length": 5}
    assert http.delete(f"/api/policies/%2F/{name}").status_code == 204
    assert http.get(f"/api/policies/%2F/{name}").status_code == 404
    assert json_of(http.get(f"/api/queues/%2F/{name}.q"))["policy"] is None


def test_policy_errors(http: httpx.Client, name: str) -> None:
    url = f"/api/policies/%2F/{name}"
    assert http.put(url, json={"pattern": "^q"}).status_code == 400
    assert http.put(url, json={"pattern": "(", "definition": {"a": 1}}).status_code == 400
    assert http.put(url, json={"pattern": "q", "definition": {}}).status_code == 400
    assert (
        http.put(url, json={"pattern": "q", "definition": {"a": 1}, "apply-to": "cats"}).status_code
        == 400
    )
    assert (
        http.put(url, json={"pattern": "q", "definition": {"a": 1}, "priority": "x"}).status_code
        == 400
    )
    assert (
        http.put(
            "/api/policies/novhost/p", json={"pattern": "q", "definition": {"a": 1}}
        ).status_code
        == 404
    )
    assert http.delete(url).status_code == 404
