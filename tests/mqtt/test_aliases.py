"""Server-to-client topic aliases (mqtt/aliases.py) on their own: assignment, LRU reuse,
and taking back an alias the client never saw."""

from __future__ import annotations

from roost.mqtt.aliases import OutgoingAliases
from roost.mqtt.packets import Publish


def _send(aliases: OutgoingAliases, topic: str) -> tuple[str, int | None, str | None]:
    packet = Publish(topic, b"", 0)
    assigned = aliases.apply(packet)
    return packet.topic, packet.properties.topic_alias, assigned


def test_new_topics_get_aliases_then_the_least_recently_used_is_reused() -> None:
    a = OutgoingAliases(2)
    assert _send(a, "x") == ("x", 1, "x")
    assert _send(a, "x") == ("", 1, None)
    assert _send(a, "y") == ("y", 2, "y")
    assert _send(a, "x") == ("", 1, None)  # x is now the most recently used
    assert _send(a, "z") == ("z", 2, "z")  # y's alias goes to z, with z's name
    assert _send(a, "y") == ("y", 1, "y")  # then x's (least recently used) to y
    assert _send(a, "z") == ("", 2, None)


def test_an_alias_taken_back_is_given_again_never_twice_at_once() -> None:
    a = OutgoingAliases(2)
    _send(a, "x")
    _send(a, "y")
    _, alias_z, assigned = _send(a, "z")  # takes x's alias 1 ...
    assert (alias_z, assigned) == (1, "z")
    a.undo("z")  # ... but that PUBLISH was too large to send
    # the next new topic reuses alias 1 (announcing its name), not y's alias 2
    assert _send(a, "w") == ("w", 1, "w")
    assert _send(a, "y") == ("", 2, None)
    assert _send(a, "z") == ("z", 1, "z")  # z was never learned: its name again
