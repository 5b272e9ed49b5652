"""The core's durability wiring with the real disk store, in process (no sockets)."""

from __future__ import annotations

from pathlib import Path

from roost.core.broker import Broker, Message, Properties
from roost.core.persistence import Persistence, persistable
from roost.store.definitions import DefinitionsFile
from roost.store.hub import DiskStore
from roost.store.paths import queue_dir
from roost.store.stream_store import StreamFiles


def boot(data: Path) -> tuple[Broker, DiskStore, Persistence]:
    disk = DiskStore(data)
    broker = Broker(store=disk, stream_storage=StreamFiles(data))
    persistence = Persistence(broker, disk, DefinitionsFile(data))
    persistence.install()
    if not persistence.recover():
        broker.catalog.add_vhost("/")
    return broker, disk, persistence


def msg(body: bytes, mode: int) -> Message:
    return Message("", "q", Properties(delivery_mode=mode, headers={"n": 1}), body)


def test_only_persistent_messages_in_durable_queues_are_written(tmp_path: Path) -> None:
    broker, disk, persistence = boot(tmp_path)
    vhost = broker.vhosts["/"]
    durable = vhost.declare_queue("q", durable=True)
    transient_q = vhost.declare_queue("t", durable=False)
    assert durable.store is not None and transient_q.store is None
    vhost.publish("", msg(b"persistent", 2))
    vhost.publish("", msg(b"transient", 1))
    disk.sync_now()
    persistence.save()
    assert durable.store.count == 1

    broker2, _, _ = boot(tmp_path)
    q = broker2.vhosts["/"].queues["q"]
    assert q.ready[0].message is None  # recovered messages stay on disk until delivered
    entry = q.take()
    assert entry is not None and entry.message.body == b"persistent"
    assert entry.message.properties.headers == {"n": 1}
    assert "t" not in broker2.vhosts["/"].queues


def test_confirm_waits_for_the_store(tmp_path: Path) -> None:
    broker, disk, _ = boot(tmp_path)
    broker.vhosts["/"].declare_queue("q", durable=True)
    client = broker.connect(
        broker.catalog.users.get("guest") or _guest(broker), "/", protocol="t", peer="p"
    )
    results: list[bool] = []
    broker.publish(client, "", msg(b"t", 1), results.append)
    assert results == [True]  # transient: at once
    broker.publish(client, "", msg(b"p", 2), results.append)
    assert results == [True]  # persistent: only after the group commit
    disk.sync_now()
    assert results == [True, True]


def _guest(broker: Broker):  # type: ignore[no-untyped-def]
    from roost.core.auth import Permission, hash_password

    user = broker.catalog.add_user("guest", hash_password("guest"))
    broker.catalog.set_permission("guest", "/", Permission())
    return user


def test_purge_and_delete_release_the_files(tmp_path: Path) -> None:
    broker, disk, _ = boot(tmp_path)
    vhost = broker.vhosts["/"]
    q = vhost.declare_queue("q", durable=True)
    for i in range(5):
        vhost.publish("", msg(b"%d" % i, 2))
    disk.sync_now()
    directory = queue_dir(tmp_path, "/", "q")
    assert list(directory.glob("*.seg"))
    assert q.purge() == 5
    disk.sync_now()
    assert not list(directory.glob("*.seg"))
    vhost.publish("", msg(b"again", 2))
    disk.sync_now()
    vhost.delete_queue(q)
    assert not directory.exists()
    assert disk.bytes_on_disk == 0


def test_persistable_drops_transient_objects() -> None:
    data = {
        "queues": [
            {"vhost": "/", "name": "keep", "durable": True, "auto_delete": False},
            {"vhost": "/", "name": "tmp", "durable": False, "auto_delete": False},
            {"vhost": "/", "name": "ad", "durable": True, "auto_delete": True},
        ],
        "exchanges": [
            {"vhost": "/", "name": "x", "durable": True, "auto_delete": False},
            {"vhost": "/", "name": "y", "durable": False, "auto_delete": False},
            {"vhost": "/", "name": "xad", "durable": True, "auto_delete": True},
        ],
        "bindings": [
            {"vhost": "/", "source": "x", "destination": "keep", "destination_type": "queue"},
            {"vhost": "/", "source": "x", "destination": "tmp", "destination_type": "queue"},
            {"vhost": "/", "source": "y", "destination": "keep", "destination_type": "queue"},
            {
                "vhost": "/",
                "source": "amq.topic",
                "destination": "x",
                "destination_type": "exchange",
            },
        ],
    }
    out = persistable(data)
    assert [q["name"] for q in out["queues"]] == ["keep"]
    assert [e["name"] for e in out["exchanges"]] == ["x", "xad"]  # as RabbitMQ keeps them
    assert [(b["source"], b["destination"]) for b in out["bindings"]] == [
        ("x", "keep"),
        ("amq.topic", "x"),
    ]
