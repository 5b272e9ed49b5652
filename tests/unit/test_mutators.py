"""Message mutators without a server: the JSON Schema subset, chains and the registry."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from roost.core.message import Message, Properties
from roost.core.mutators import Chain, MutationRefused, Rejected, chain_for, registry, stats
from roost.core.mutators.schema import validate


@pytest.mark.parametrize(
    ("value", "schema", "problem"),
    [
        ({"a": 1}, {"type": "object"}, None),
        ([1, 2], {"type": "object"}, "$: expected object"),
        (True, {"type": "integer"}, "$: expected integer"),
        (2.0, {"type": "integer"}, None),
        (None, {"type": ["string", "null"]}, None),
        ("b", {"enum": ["a"]}, "$: not one of ['a']"),
        ({}, {"required": ["id"]}, "$: 'id' is required"),
        ({"x": 1}, {"properties": {}, "additionalProperties": False}, "$: 'x' is not allowed"),
        ({"n": -1}, {"properties": {"n": {"minimum": 0}}}, "$.n: below the minimum 0"),
        ([1, "x"], {"items": {"type": "number"}}, "$[1]: expected number"),
        ("", {"minLength": 1}, "$: shorter than 1"),
        ("abc", {"maxLength": 2}, "$: longer than 2"),
        (5, {"maximum": 4}, "$: above the maximum 4"),
    ],
)
def test_schema_subset(value: Any, schema: dict[str, Any], problem: str | None) -> None:
    assert validate(value, schema) == problem


def _message(body: bytes = b"{}") -> Message:
    return Message("", "q", Properties(), body)


def test_no_policy_key_means_no_chain() -> None:
    assert chain_for(None) is None
    assert chain_for({"max-length": 3}) is None


def test_builtins_are_entry_points() -> None:
    assert registry.get("add-timestamp").__name__ == "add_timestamp"
    assert registry.get("json-schema").__name__ == "json_schema"


def test_a_rejection_and_a_failure_are_told_apart() -> None:
    chain = chain_for({"message-mutators": ["json-schema"],
                       "message-mutator-args": {"json-schema": {"schema": {"type": "array"}}}})
    assert chain is not None
    rejected = stats.rejected
    with pytest.raises(MutationRefused, match=r"json-schema: \$: expected array"):
        chain.run(_message())
    assert stats.rejected == rejected + 1
    broken = chain_for({"message-mutators": ["json-schema"]})  # no schema given: a failure
    assert broken is not None
    failures = stats.failures
    with pytest.raises(MutationRefused, match="json-schema failed: ValueError"):
        broken.run(_message())
    assert stats.failures == failures + 1


def test_rejected_is_what_a_mutator_raises_to_refuse() -> None:
    assert issubclass(Rejected, Exception) and not issubclass(Rejected, MutationRefused)


def test_an_unknown_name_fails_closed() -> None:
    chain = chain_for({"message-mutators": "add-timestamp, nope"})
    assert chain is not None and chain.names == ["add-timestamp", "nope"]
    with pytest.raises(MutationRefused, match="no mutator 'nope'"):
        chain.run(_message())


def _raising(exc: BaseException) -> Chain:
    def mutate(message: Message, args: dict[str, Any]) -> Message:
        raise exc

    return Chain([("raiser", mutate, {}, "")])


def test_sys_exit_in_a_mutator_is_a_failure_not_an_exit() -> None:
    failures = stats.failures
    with pytest.raises(MutationRefused, match="raiser failed: SystemExit: 3"):
        _raising(SystemExit(3)).run(_message())
    assert stats.failures == failures + 1


@pytest.mark.parametrize("exc", [asyncio.CancelledError(), KeyboardInterrupt()])
def test_stop_signals_pass_through(exc: BaseException) -> None:
    with pytest.raises(type(exc)):
        _raising(exc).run(_message())


@pytest.mark.parametrize("definition", [
    {"message-mutators": 5},
    {"message-mutators": ["add-timestamp"], "message-mutator-args": {"add-timestamp": 5}},
])
def test_a_definition_that_slipped_past_validation_refuses_instead_of_raising(
    definition: dict[str, Any],
) -> None:
    chain = chain_for(definition)  # a hand-edited definitions file, say
    assert chain is not None
    with pytest.raises(MutationRefused):
        chain.run(_message())
