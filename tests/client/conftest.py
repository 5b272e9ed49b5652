"""Both brokers the client must work with: a Roost (with an AMQPS listener) and a RabbitMQ
3.10 node (with one too), each started once for the directory; ``broker`` runs a test
against each. ``Broker`` hides how each is operated (close a connection, raise the
memory alarm, add a vhost): RabbitMQ through rabbitmqctl, Roost through its API."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.rabbitmq import RabbitMQ
from tests.security.tls_support import PKI, TLSRoost


@dataclass
class Broker:
    name: str
    port: int
    amqps_port: int
    pki: PKI
    roost: TLSRoost | None = None
    rabbit: RabbitMQ | None = None

    def url(self, vhost: str = "/", query: str = "", *, user: str = "guest:guest") -> str:
        path = urllib.parse.quote(vhost, safe="")
        return f"amqp://{user}@127.0.0.1:{self.port}/{path}" + (f"?{query}" if query else "")

    def amqps_url(self, query: str = "") -> str:
        return f"amqps://guest:guest@localhost:{self.amqps_port}/%2F" + (
            f"?{query}" if query else "")

    def _api(self) -> httpx.Client:
        assert self.roost is not None
        return httpx.Client(base_url=self.roost.http_url + "/api", auth=("guest", "guest"),
                            timeout=10.0)

    def close_connection(self, name: str, reason: str = "closed by the test") -> None:
        """Close the connection whose client gave ``name`` (RabbitMQ: every connection)."""
        if self.rabbit is not None:
            self.rabbit.ctl("close_all_connections", reason)
            return
        with self._api() as api:
            for c in api.get("/connections").json():
                if c["client_properties"].get("connection_name") == name:
                    api.delete(f"/connections/{urllib.parse.quote(c['name'], safe='')}",
                               headers={"X-Reason": reason}).raise_for_status()
                    return
        raise AssertionError(f"no connection named {name!r}")

    def memory_alarm(self, on: bool) -> None:
        if self.rabbit is not None:
            self.rabbit.ctl("set_vm_memory_high_watermark", "0.000001" if on else "0.4")
            return
        with self._api() as api:
            node = api.get("/nodes").json()[0]["name"]
            api.put(f"/nodes/{node}/vm-memory-high-watermark",
                    json={"limit": "1MiB" if on else "0.99"}).raise_for_status()

    def add_vhost(self, vhost: str) -> None:
        if self.rabbit is not None:
            self.rabbit.ctl("add_vhost", vhost)
            self.rabbit.ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
            return
        quoted = urllib.parse.quote(vhost, safe="")
        with self._api() as api:
            api.put(f"/vhosts/{quoted}", json={}).raise_for_status()
            api.put(f"/permissions/{quoted}/guest",
                    json={"configure": ".*", "write": ".*", "read": ".*"}).raise_for_status()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return PKI(tmp_path_factory.mktemp("client-pki"))


@pytest.fixture(scope="session")
def client_roost(tmp_path_factory: pytest.TempPathFactory, pki: PKI) -> Iterator[TLSRoost]:
    server = TLSRoost(tmp_path_factory.mktemp("client-roost"), *pki.server_args(),
                      "--alarm-check-interval", "0.05", tls_ports=("amqps",)).start()
    yield server
    assert server.stop() == 0, server.log
    assert "Traceback" not in server.log, server.log


@pytest.fixture(scope="session")
def rabbit(tmp_path_factory: pytest.TempPathFactory, pki: PKI) -> Iterator[RabbitMQ]:
    base: Path = tmp_path_factory.mktemp("client-rabbitmq")
    node = RabbitMQ(base, tls=(pki.ca_file, pki.server_cert, pki.server_key)).start()
    yield node
    node.stop()


@pytest.fixture(params=["roost", "rabbitmq"])
def broker(request: pytest.FixtureRequest, pki: PKI) -> Broker:
    if request.param == "roost":
        roost: TLSRoost = request.getfixturevalue("client_roost")
        return Broker("roost", roost.amqp_port, roost.amqps_port, pki, roost=roost)
    rabbit: RabbitMQ = request.getfixturevalue("rabbit")
    return Broker("rabbitmq", rabbit.port, rabbit.amqps_port, pki, rabbit=rabbit)
