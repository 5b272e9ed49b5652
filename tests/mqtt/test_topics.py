"""Topic name and filter rules (MQTT 5.0 spec 4.7, 4.8.2) and matching."""

from __future__ import annotations

import pytest

from roost.mqtt import reason_codes
from roost.mqtt.errors import MQTTError
from roost.mqtt.topics import (
    has_wildcards,
    is_system_topic,
    split_shared,
    topic_matches,
    validate_topic_filter,
    validate_topic_name,
)

VALID_FILTERS = ["#", "+", "a/#", "a/+/c", "+/+", "/", "a//b", "+/#", "sport/tennis/#",
                 "$share/g/a/+", "$share/g/#", "$SYS/#", "ü/+/ß"]
INVALID_FILTERS = ["", "a#", "a/#/b", "a+/b", "a/b+", "#/a", "a/##", "$share/g", "$share//a",
                   "$share/g+/a", "$share/g#/a", "a\x00b", "x" * 70_000]


@pytest.mark.parametrize("topic_filter", VALID_FILTERS)
def test_valid_filters(topic_filter: str) -> None:
    validate_topic_filter(topic_filter)


@pytest.mark.parametrize("topic_filter", INVALID_FILTERS, ids=repr)
def test_invalid_filters_raise_topic_filter_invalid(topic_filter: str) -> None:
    with pytest.raises(MQTTError) as info:
        validate_topic_filter(topic_filter)
    assert info.value.reason_code == reason_codes.TOPIC_FILTER_INVALID


@pytest.mark.parametrize("name", ["", "a/+", "#", "a/#", "a\x00", "é" * 40_000], ids=repr)
def test_invalid_names_raise_topic_name_invalid(name: str) -> None:
    with pytest.raises(MQTTError) as info:
        validate_topic_name(name)
    assert info.value.reason_code == reason_codes.TOPIC_NAME_INVALID


def test_names_and_a_lower_length_limit() -> None:
    validate_topic_name("a/b/c")
    validate_topic_name("$SYS/broker")
    validate_topic_name("é" * 32_767)  # 65,534 bytes
    validate_topic_name("x" * 255, max_length=255)
    with pytest.raises(MQTTError):
        validate_topic_name("x" * 256, max_length=255)
    with pytest.raises(MQTTError):
        validate_topic_filter("é" * 128, max_length=255)  # 256 bytes


@pytest.mark.parametrize(
    ("topic_filter", "name", "matches"),
    [
        ("sport/tennis/player1/#", "sport/tennis/player1", True),
        ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
        ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", True),
        ("sport/#", "sport", True),
        ("sport/tennis/+", "sport/tennis/player1", True),
        ("sport/tennis/+", "sport/tennis/player1/ranking", False),
        ("sport/+", "sport", False),
        ("sport/+", "sport/", True),
        ("+/+", "/finance", True),
        ("/+", "/finance", True),
        ("+", "/finance", False),
        ("#", "$SYS/x", False),
        ("+/monitor/Clients", "$SYS/monitor/Clients", False),
        ("$SYS/#", "$SYS/monitor/Clients", True),
        ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
        ("a/b", "a/b", True),
        ("a/b", "a/c", False),
        ("A/b", "a/b", False),
    ],
)
def test_matching_follows_the_spec_examples(topic_filter: str, name: str, matches: bool) -> None:
    assert topic_matches(topic_filter, name) is matches


def test_helpers() -> None:
    assert split_shared("$share/group/a/+") == ("group", "a/+")
    assert split_shared("a/+") is None
    assert has_wildcards("a/+") and has_wildcards("#") and not has_wildcards("a/b")
    assert is_system_topic("$SYS/x") and not is_system_topic("a/$")
