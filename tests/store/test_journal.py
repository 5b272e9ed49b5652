"""The definitions journal in process: records from real broker changes, replay onto a
snapshot (cascades included), replay from any earlier point, and the files' fallbacks
(store/definitions.py) when the snapshot is damaged."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from roost.core.auth import Permission, hash_password
from roost.core.broker import Broker
from roost.core.journal import Changes, replay
from roost.core.persistence import persistable
from roost.store.definitions import DefinitionsFile
from tests.brokers import memory_broker


def broker() -> Broker:
    b = memory_broker()
    changes = Changes(b.catalog)
    b.journal = changes  # type: ignore[attr-defined]
    b.catalog.on_change.append(changes.note)
    b.vhosts["/"].on_change.append(changes.note)
    return b


def state(b: Broker) -> dict[str, list[dict[str, object]]]:
    """What a snapshot would hold, sections sorted for comparison."""
    data = persistable(b.management.export_definitions())
    return {
        section: sorted(data.get(section, []), key=lambda i: json.dumps(i, sort_keys=True))
        for section in ("users", "vhosts", "permissions", "policies", "queues", "exchanges",
                        "bindings")
    }  # fmt: skip


def normalised(doc: dict[str, object]) -> dict[str, list[dict[str, object]]]:
    return {
        section: sorted(doc.get(section, []), key=lambda i: json.dumps(i, sort_keys=True))  # type: ignore[arg-type]
        for section in ("users", "vhosts", "permissions", "policies", "queues", "exchanges",
                        "bindings")
    }  # fmt: skip


def test_replaying_the_records_rebuilds_the_state_from_any_earlier_point() -> None:
    b = broker()
    changes: Changes = b.journal  # type: ignore[attr-defined]
    base = persistable(b.management.export_definitions())
    history = []
    vhost = b.vhosts["/"]
    vhost.declare_queue("q1", durable=True)
    vhost.declare_queue("t1", durable=False)  # never written
    vhost.declare_exchange("x1", "topic", durable=True)
    vhost.bind("x1", vhost.queues["q1"], "a.#", {})
    history += changes.records()
    middle = state(b)
    b.catalog.add_user("u", hash_password("p"), tags=["monitoring"])
    b.catalog.set_permission("u", "/", Permission(".*", ".*", ".*"))
    vhost.delete_exchange("x1")  # its binding goes with it (a cascade on replay)
    vhost.delete_queue(vhost.queues["q1"])
    vhost.declare_queue("q2", durable=True, arguments={"x-max-length": 5})
    history += changes.records()
    assert all(r["k"] != ["/", "t1"] for r in history)
    now = state(b)
    assert normalised(replay(base, history)) == now
    # replaying from a snapshot taken in the middle, the earlier records included
    assert normalised(replay(dict(middle), history)) == now
    # a record may be replayed twice (a crash between a compaction's rename and rotation)
    assert normalised(replay(replay(base, history), history)) == now


def test_deleting_a_vhost_drops_what_hangs_off_it() -> None:
    b = broker()
    changes: Changes = b.journal  # type: ignore[attr-defined]
    b.catalog.put_vhost("v")
    v = b.vhosts["v"]
    v.on_change.append(changes.note)
    v.declare_queue("q", durable=True)
    b.catalog.set_permission("guest", "v", Permission())
    changes.records()  # a snapshot now holds everything (as Persistence.save does)
    base = persistable(b.management.export_definitions())
    changes.stored_from(base)
    b.catalog.delete_vhost("v")
    doc = replay(base, changes.records())
    assert [x["name"] for x in doc["vhosts"]] == ["/"]
    assert all(item.get("vhost") != "v" for s in ("queues", "permissions") for item in doc[s])


def test_damaged_snapshot_falls_back_to_the_backup_and_journals(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = DefinitionsFile(tmp_path)
    files.save({"vhosts": [{"name": "/"}]})  # the first snapshot: its backup is a copy
    files.append([{"s": "queues", "k": ["/", "a"], "v": {"name": "a", "vhost": "/"}}])
    files.save({"vhosts": [{"name": "/"}], "queues": [{"name": "a", "vhost": "/"}]})
    files.append([{"s": "queues", "k": ["/", "b"], "v": {"name": "b", "vhost": "/"}}])
    (tmp_path / "definitions.json").write_text("{damaged")
    with caplog.at_level(logging.WARNING, "roost.store"):
        loaded = DefinitionsFile(tmp_path).load()
    assert loaded is not None
    doc = replay(*loaded)
    assert sorted(q["name"] for q in doc["queues"]) == ["a", "b"]
    assert "using the previous copy" in caplog.text
    assert len(list(tmp_path.glob("definitions.json.damaged-*"))) == 1


def test_journal_damage_costs_only_the_damaged_record(tmp_path: Path) -> None:
    files = DefinitionsFile(tmp_path)
    files.save({})
    for name in "abc":
        files.append([{"s": "queues", "k": ["/", name], "v": {"name": name, "vhost": "/"}}])
    raw = bytearray((tmp_path / "definitions.journal").read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # inside the middle record
    (tmp_path / "definitions.journal").write_bytes(bytes(raw) + b"\x00\x00\x01")  # + torn tail
    loaded = DefinitionsFile(tmp_path).load()
    assert loaded is not None
    assert [r["k"][1] for r in loaded[1]] == ["a", "c"]
