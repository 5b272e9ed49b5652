"""Listing parameters: name, use_regex, sort, sort_reverse, page, page_size, columns."""

from __future__ import annotations

import httpx

from tests.http.conftest import json_of


def test_filter_sort_page_columns(http: httpx.Client, name: str) -> None:
    for i in range(5):
        http.put(f"/api/queues/%2F/{name}.{i}", json={})
    q = {"name": name, "sort": "name", "sort_reverse": "true", "columns": "name,vhost"}
    found = json_of(http.get("/api/queues", params=q))
    assert found == [{"name": f"{name}.{i}", "vhost": "/"} for i in reversed(range(5))]
    page = json_of(http.get("/api/queues", params={**q, "page": "2", "page_size": "2"}))
    assert page["items"] == [{"name": f"{name}.{i}", "vhost": "/"} for i in (2, 1)]
    assert (page["page"], page["page_count"], page["filtered_count"], page["item_count"]) == (
        2,
        3,
        5,
        2,
    )
    assert page["total_count"] >= 5
    regex = json_of(
        http.get(
            "/api/queues",
            params={"name": rf"^{name}\.[03]$", "use_regex": "true", "columns": "name"},
        )
    )
    assert sorted(x["name"] for x in regex) == [f"{name}.0", f"{name}.3"]
    nested = json_of(
        http.get(
            "/api/queues", params={"name": f"{name}.0", "columns": "name,message_stats.publish"}
        )
    )
    assert nested == [{"name": f"{name}.0", "message_stats": {"publish": 0}}]


def test_bad_parameters(http: httpx.Client) -> None:
    r = http.get("/api/queues", params={"page": "0"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_pagination_parameters"
    assert http.get("/api/queues", params={"page": "x"}).status_code == 400
    assert http.get("/api/queues", params={"page_size": "1000", "page": "1"}).status_code == 400
    r = http.get("/api/queues", params={"page": "999"})
    assert r.status_code == 400 and r.json()["error"] == "page_out_of_range"
    assert http.get("/api/queues", params={"name": "(", "use_regex": "true"}).status_code == 400
