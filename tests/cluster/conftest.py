"""A real etcd on free loopback ports in a temp dir, started by the tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from roost.cluster.etcd_server import EtcdServer, find_etcd
from tests.support import RoostProcess, free_port, prerequisite


def started_etcd(data_dir: Path) -> EtcdServer:
    if find_etcd() is None:
        prerequisite("etcd is not installed (scripts/test installs Debian's etcd-server)")
    return EtcdServer(data_dir).start()


@pytest.fixture(scope="session")
def shared_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """One etcd for the tests that never stop it; each test keeps to a key prefix of its
    own (``etcd_prefix``)."""
    server = started_etcd(tmp_path_factory.mktemp("etcd"))
    yield server
    server.stop()


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    """An etcd of the test's own, which it may kill and restart."""
    server = started_etcd(tmp_path / "etcd")
    yield server
    server.kill()


@pytest.fixture
def etcd_prefix(request: pytest.FixtureRequest) -> str:
    return "/t/" + request.node.name.replace("[", ".").replace("]", "")


def node(
    etcd: EtcdServer, data_dir: Path, name: str, *extra: str, prefix: str = "/c"
) -> RoostProcess:
    """A ``roost server`` that is node ``name`` of the cluster under ``prefix`` (not yet
    started): its own data dir and a free cluster port."""
    return RoostProcess(
        data_dir,
        "--cluster",
        etcd.url(prefix),
        "--node-name",
        name,
        "--cluster-port",
        str(free_port()),
        *extra,
    )
