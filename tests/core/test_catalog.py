"""core/catalog.py on its own: every definition change goes through one method and ends
in one typed event; what it refuses changes nothing; rights of connected clients follow
permission changes; deleting a user or vhost closes its connections."""

from __future__ import annotations

import pytest

from roost.core.errors import NotFound, PreconditionFailed
from roost.core.events import (
    PermissionChanged,
    PolicyChanged,
    PolicyDeleted,
    TopicPermissionChanged,
    UserChanged,
    UserDeleted,
    UserLimitsChanged,
    VHostChanged,
    VHostDeleted,
    VHostLimitsChanged,
)
from tests.core.components import parts


def test_each_change_is_one_typed_event() -> None:
    p = parts()
    p.heard.clear()
    c = p.catalog
    c.put_vhost("v", description="d")
    c.put_user("u", password="pw", tags="management")
    c.put_permission("u", "v", configure=".*", write=".*", read=".*")
    c.put_topic_permission("u", "v", exchange="amq.topic", write=".*", read=".*")
    c.put_policy("v", "p", pattern=".*", definition={"max-length": 1})
    c.put_vhost_limit("v", "max-queues", 10)
    c.put_user_limit("u", "max-channels", 2)
    c.delete_policy("v", "p")
    assert [type(e) for e in p.heard] == [
        VHostChanged,  # added
        VHostChanged,  # its metadata set
        UserChanged,  # added
        UserChanged,  # its hashing algorithm set
        PermissionChanged,
        TopicPermissionChanged,
        PolicyChanged,
        VHostLimitsChanged,
        UserLimitsChanged,
        PolicyDeleted,
    ]
    assert c.vhosts["v"].limits == {"max-queues": 10}
    assert c.user_limits == {"u": {"max-channels": 2}}


def test_refused_changes_change_nothing() -> None:
    p = parts()
    p.heard.clear()
    c = p.catalog
    with pytest.raises(PreconditionFailed):
        c.put_permission("guest", "/", configure="(", write=".*", read=".*")
    with pytest.raises(PreconditionFailed):
        c.put_vhost_limit("/", "max-bananas", 1)
    with pytest.raises(PreconditionFailed):
        c.put_policy("/", "p", pattern=".*", definition={"max-length": "many"})
    with pytest.raises(NotFound):
        c.put_permission("nobody", "/", configure=".*", write=".*", read=".*")
    assert p.heard == [] and not c.policies and not c.vhosts["/"].limits


def test_connected_clients_get_new_rights_at_once() -> None:
    p = parts()
    client = p.client()
    assert client.access is not None
    client.access.check("configure", "queue", "q")
    p.catalog.put_permission("guest", "/", configure="^only$", write=".*", read=".*")
    with pytest.raises(Exception, match="configure access to queue 'q'"):
        client.access.check("configure", "queue", "q")


def test_deleting_a_user_or_vhost_closes_its_connections() -> None:
    p = parts()
    reasons: list[str] = []
    p.catalog.put_vhost("v")
    p.catalog.put_permission("guest", "v", configure=".*", write=".*", read=".*")
    in_v = p.client(vhost="v", peer="127.0.0.1:1")
    in_root = p.client(peer="127.0.0.1:2")
    in_v._closer = reasons.append
    in_root._closer = reasons.append
    p.catalog.delete_vhost("v")
    assert reasons == ["vhost 'v' is deleted"]
    assert isinstance(p.heard[-1], VHostDeleted) and "v" not in p.catalog.vhosts
    assert not any(k[1] == "v" for k in p.catalog.permissions)
    p.catalog.delete_user("guest")
    assert reasons[-1] == "user 'guest' was deleted"
    assert isinstance(p.heard[-1], UserDeleted)
