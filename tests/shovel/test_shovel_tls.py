"""Shovels to a destination reached over ``amqps://`` (issue 23 item 2, "with amqps://
where TLS is set up"): the URI's TLS options (RabbitMQ's ``cacertfile``, ``verify``,
``server_name_indication``) are what the shovel connects with, and a certificate that
does not verify stops the shovel without taking anything from the source."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.security.tls_support import PKI, TLSRoost
from tests.shovel.shovel_ops import depth, put_shovel, shovels, state, take, unique
from tests.shovel.shovel_ops import publish as publish_many
from tests.support import RoostProcess, eventually


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return PKI(tmp_path_factory.mktemp("shovel-pki"))


@pytest.fixture(scope="module")
def tls_pair(
    tmp_path_factory: pytest.TempPathFactory, pki: PKI
) -> Iterator[tuple[RoostProcess, TLSRoost]]:
    """A plain Roost (the shovel's home and source) and a Roost with an AMQPS listener
    whose certificate, from ``pki``'s CA, names 127.0.0.1 and localhost."""
    src = RoostProcess(tmp_path_factory.mktemp("src")).start()
    # every TLS listener on a free port: a default one (8883, 61614, …) may be taken
    dest = TLSRoost(tmp_path_factory.mktemp("dest"), *pki.server_args()).start()
    try:
        yield src, dest
    finally:
        src.kill()
        dest.kill()


def amqps_uri(dest: TLSRoost, query: str) -> str:
    return f"amqps://guest:guest@localhost:{dest.amqps_port}/%2F?{query}"


def test_on_confirm_shovel_to_an_amqps_destination(
    tls_pair: tuple[RoostProcess, TLSRoost], pki: PKI
) -> None:
    src, dest = tls_pair
    queue, target, name = unique("src"), unique("dest"), unique("sh")
    bodies = [f"m{i}".encode() for i in range(200)]
    publish_many(src.url, queue, bodies)
    made = put_shovel(src, name, {
        "src-uri": "amqp://", "src-queue": queue,
        "dest-uri": amqps_uri(dest, f"cacertfile={pki.ca_file}&verify=verify_peer"
                                    "&server_name_indication=localhost"),
        "dest-queue": target, "ack-mode": "on-confirm",
    })
    assert made.status_code == 201, made.text
    eventually(lambda: depth(dest.url, target) == len(bodies), timeout=8,
               what=lambda: (depth(dest.url, target), shovels(src).get(name)))
    eventually(lambda: depth(src.url, queue) == 0, what=lambda: depth(src.url, queue))
    row = shovels(src)[name]
    assert row["state"] == "running", row
    assert row["dest_uri"].startswith(f"amqps://localhost:{dest.amqps_port}/"), row
    assert "guest" not in row["dest_uri"], row
    assert [body for _, body in take(dest.url, target)] == bodies


def _other_ca(root: Path) -> Path:
    path = root / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(path))
    return path


@pytest.mark.parametrize("mismatch", ["unknown CA", "wrong server name"])
def test_a_destination_certificate_that_does_not_verify_terminates_the_shovel(
    tls_pair: tuple[RoostProcess, TLSRoost], pki: PKI, tmp_path: Path, mismatch: str
) -> None:
    src, dest = tls_pair
    if mismatch == "unknown CA":
        query = f"cacertfile={_other_ca(tmp_path)}&verify=verify_peer"
    else:
        query = f"cacertfile={pki.ca_file}&server_name_indication=other.example"
    queue, target, name = unique("src"), unique("dest"), unique("sh")
    bodies = [f"m{i}".encode() for i in range(20)]
    publish_many(src.url, queue, bodies)
    made = put_shovel(src, name, {
        "src-uri": "amqp://", "src-queue": queue,
        "dest-uri": amqps_uri(dest, query), "dest-queue": target,
        "ack-mode": "on-confirm", "reconnect-delay": 30,
    })
    assert made.status_code == 201, made.text
    eventually(lambda: state(src, name) == "terminated", timeout=8,
               what=lambda: shovels(src).get(name))
    reason = shovels(src)[name]["reason"].lower()
    assert "certificate" in reason and "verif" in reason, reason
    if mismatch == "wrong server name":
        assert "other.example" in reason or "hostname" in reason, reason
    assert depth(src.url, queue) == len(bodies)  # nothing left the source
    assert depth(dest.url, target) == 0
