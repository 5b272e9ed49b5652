"""core/quotas.py on its own, built with its settings: broker, vhost and user limits,
message size, consumers per channel, and failed-login throttling."""

from __future__ import annotations

import pytest

from roost.core.errors import AccessRefused, NotAllowed, PreconditionFailed
from roost.core.quotas import LoginThrottle, Quotas
from roost.core.settings import BrokerSettings
from tests.core.components import parts


def test_limits_come_from_the_settings() -> None:
    p = parts()
    quotas = Quotas(
        BrokerSettings(max_connections=1, consumer_max_per_channel=2, max_message_size=10),
        p.catalog,
        p.connections,
    )
    user, vhost = p.catalog.users["guest"], p.catalog.vhosts["/"]
    quotas.check_connection_limits(user, vhost)
    p.client()
    with pytest.raises(NotAllowed, match=r"node connection limit \(1\) is reached"):
        quotas.check_connection_limits(user, vhost)
    quotas.check_consumer_limit(1)
    with pytest.raises(NotAllowed, match=r"maximum \(2\) of consumers per channel"):
        quotas.check_consumer_limit(2)
    quotas.check_message_size(10)
    with pytest.raises(PreconditionFailed, match="message size 11 is larger"):
        quotas.check_message_size(11)


def test_vhost_and_user_limits_are_read_from_the_catalog() -> None:
    p = parts()
    quotas = Quotas(BrokerSettings(), p.catalog, p.connections)
    user, vhost = p.catalog.users["guest"], p.catalog.vhosts["/"]
    client = p.client()
    p.catalog.put_vhost_limit("/", "max-connections", 1)
    with pytest.raises(NotAllowed, match=r"connection limit \(1\) is reached"):
        quotas.check_connection_limits(user, vhost)
    p.catalog.delete_vhost_limit("/", "max-connections")
    p.catalog.put_user_limit("guest", "max-channels", 0)
    with pytest.raises(NotAllowed, match=r"allowed user limit of \(0\)"):
        quotas.check_channel_limit(client)


def test_failed_logins_are_throttled_per_host() -> None:
    throttle = LoginThrottle(per_minute=2)
    throttle.failed("10.0.0.1")
    throttle.check("10.0.0.1")
    throttle.failed("10.0.0.1")
    with pytest.raises(AccessRefused, match=r"too many failed logins from 10\.0\.0\.1"):
        throttle.check("10.0.0.1")
    throttle.check("10.0.0.2")  # another host is not affected
    LoginThrottle(per_minute=0).check("10.0.0.1")  # 0: off
