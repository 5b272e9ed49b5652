"""/api/permissions and /api/topic-permissions."""

from __future__ import annotations

import httpx

from tests.http.conftest import json_of


def test_permission_lifecycle(http: httpx.Client, name: str) -> None:
    http.put(f"/api/users/{name}", json={"password": "p", "tags": ""})
    body = {"configure": "^a", "write": "^b", "read": "^c"}
    assert http.put(f"/api/permissions/%2F/{name}", json=body).status_code == 201
    assert http.put(f"/api/permissions/%2F/{name}", json=body).status_code == 204
    assert json_of(http.get(f"/api/permissions/%2F/{name}")) == {"user": name, "vhost": "/", **body}
    assert {"user": name, "vhost": "/", **body} in json_of(http.get("/api/permissions"))
    assert http.delete(f"/api/permissions/%2F/{name}").status_code == 204
    assert http.get(f"/api/permissions/%2F/{name}").status_code == 404
    assert http.delete(f"/api/permissions/%2F/{name}").status_code == 404


def test_permission_errors(http: httpx.Client, name: str) -> None:
    http.put(f"/api/users/{name}", json={"password": "p", "tags": ""})
    assert http.put(f"/api/permissions/%2F/{name}", json={"configure": "("}).status_code == 400
    r = http.put(f"/api/permissions/%2F/{name}", json={"configure": "(", "write": "", "read": ""})
    assert r.status_code == 400 and "regular expression" in r.json()["reason"]
    assert (
        http.put(
            "/api/permissions/%2F/nobody", json={"configure": "", "write": "", "read": ""}
        ).status_code
        == 404
    )
    assert (
        http.put(
            f"/api/permissions/novhost/{name}", json={"configure": "", "write": "", "read": ""}
        ).status_code
        == 404
    )


def test_topic_permissions(http: httpx.Client, name: str) -> None:
    http.put(f"/api/users/{name}", json={"password": "p", "tags": ""})
    body = {"exchange": "amq.topic", "write": "^w", "read": "^r"}
    assert http.put(f"/api/topic-permissions/%2F/{name}", json=body).status_code == 201
    expected = {"user": name, "vhost": "/", **body}
    assert json_of(http.get(f"/api/topic-permissions/%2F/{name}")) == [expected]
    assert expected in json_of(http.get("/api/topic-permissions"))
    assert json_of(http.get(f"/api/users/{name}/topic-permissions")) == [expected]
    assert http.put(f"/api/topic-permissions/%2F/{name}", json={"exchange": "x"}).status_code == 400
    assert http.delete(f"/api/topic-permissions/%2F/{name}").status_code == 204
    assert http.get(f"/api/topic-permissions/%2F/{name}").status_code == 404
