"""Saved definitions at start are recovered leniently: a policy that no longer validates
is skipped (or, when only its mutator is missing, kept) instead of stopping the import of
every queue after it; an import through the API refuses the same document whole."""

from __future__ import annotations

from typing import Any

import pytest

from roost.core.definitions import import_definitions
from roost.core.errors import PreconditionFailed
from tests.brokers import memory_broker


def _document(definition: dict[str, Any]) -> dict[str, Any]:
    return {
        "policies": [{"vhost": "/", "name": "p", "pattern": ".*", "definition": definition}],
        "queues": [{"name": "after-the-policy", "vhost": "/"}],
    }


@pytest.mark.parametrize("definition", [{"message-mutators": 5}, {"max-priority": 3}])
def test_an_invalid_saved_policy_is_skipped_at_recovery(
    definition: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    broker = memory_broker()
    import_definitions(broker.catalog, broker, _document(definition), recovering=True)
    assert ("/", "p") not in broker.catalog.policies
    assert "after-the-policy" in broker.vhosts["/"].queues
    assert "policy 'p' skipped" in caplog.text


def test_a_policy_naming_a_missing_mutator_is_kept_at_recovery() -> None:
    broker = memory_broker()
    document = _document({"message-mutators": ["gone"]})
    import_definitions(broker.catalog, broker, document, recovering=True)
    assert ("/", "p") in broker.catalog.policies
    assert broker.vhosts["/"].queues["after-the-policy"].mutators is not None  # fails closed


@pytest.mark.parametrize(
    "definition", [{"message-mutators": 5}, {"message-mutators": ["gone"]}, {"max-priority": 3}]
)
def test_an_import_refuses_the_document_whole(definition: dict[str, Any]) -> None:
    broker = memory_broker()
    with pytest.raises(PreconditionFailed, match=r"policies\[0\]: Validation failed"):
        import_definitions(broker.catalog, broker, _document(definition))
    assert not broker.catalog.policies and "after-the-policy" not in broker.vhosts["/"].queues
