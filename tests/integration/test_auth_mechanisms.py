"""Both SASL mechanisms the broker offers, chosen explicitly by py-amqp."""

from __future__ import annotations

import amqp
import pytest

from tests.support import RoostProcess


@pytest.mark.parametrize("mechanism", ["PLAIN", "AMQPLAIN"])
def test_login_with_each_mechanism(roost: RoostProcess, mechanism: str) -> None:
    conn = amqp.Connection(
        f"127.0.0.1:{roost.amqp_port}", userid="guest", password="guest",
        login_method=mechanism, connect_timeout=5,
    )
    conn.connect()
    try:
        assert conn.connected
        conn.channel().queue_declare(f"auth.{mechanism}", auto_delete=True)
    finally:
        conn.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "AMQPLAIN"])
def test_wrong_password_is_refused_with_each_mechanism(
    roost: RoostProcess, mechanism: str
) -> None:
    conn = amqp.Connection(
        f"127.0.0.1:{roost.amqp_port}", userid="guest", password="nope",
        login_method=mechanism, connect_timeout=5,
    )
    with pytest.raises(amqp.exceptions.AccessRefused):
        conn.connect()
    conn.collect()
