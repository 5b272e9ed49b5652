"""Health checks and the aliveness test."""

from __future__ import annotations

import httpx
import pytest
from amqpstorm.management import ApiError, ManagementApi

from tests.http.conftest import json_of
from tests.support import RoostProcess


def test_checks(http: httpx.Client, mgmt: RoostProcess) -> None:
    assert json_of(http.get("/api/health/checks/alarms")) == {"status": "ok"}
    assert json_of(http.get("/api/health/checks/local-alarms")) == {"status": "ok"}
    assert json_of(http.get("/api/health/checks/virtual-hosts")) == {"status": "ok"}
    assert json_of(http.get(f"/api/health/checks/port-listener/{mgmt.amqp_port}"))["status"] == "ok"
    r = http.get("/api/health/checks/port-listener/1")
    assert r.status_code == 503 and r.json()["status"] == "failed"
    assert http.get("/api/health/checks/port-listener/abc").status_code == 400
    assert json_of(http.get("/api/health/checks/protocol-listener/amqp"))["status"] == "ok"
    assert json_of(http.get("/api/health/checks/protocol-listener/mqtt"))["status"] == "ok"
    # no TLS settings here: no AMQPS listener
    assert http.get("/api/health/checks/protocol-listener/amqps").status_code == 503


def test_aliveness(http: httpx.Client) -> None:
    assert json_of(http.get("/api/aliveness-test/%2F")) == {"status": "ok"}
    assert json_of(http.get("/api/queues/%2F/aliveness-test"))["messages"] == 0
    assert http.get("/api/aliveness-test/nope").status_code == 404


def test_amqpstorm_node_healthcheck(http: httpx.Client, mgmt: RoostProcess) -> None:
    """amqpstorm's management client asks RabbitMQ 3.10's /api/healthchecks/node (and
    /node/{node}); RabbitMQ answers {"status": "ok"}, another node's name 404, and a
    request without credentials 401."""
    api = ManagementApi(mgmt.http_url, "guest", "guest", timeout=5)
    assert api.healthchecks.get() == {"status": "ok"}
    node = api.overview()["node"]
    assert api.healthchecks.get(node) == {"status": "ok"}
    with pytest.raises(ApiError) as err:
        api.healthchecks.get("rabbit@elsewhere")
    assert err.value.error_code == 404
    assert json_of(http.get("/api/healthchecks/node")) == {"status": "ok"}
    assert httpx.get(mgmt.http_url + "/api/healthchecks/node").status_code == 401
