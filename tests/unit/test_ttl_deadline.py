"""Message deadline: the lower of queue TTL and per-message expiration."""

import pytest

from roost.core.features.ttl import deadline_ms, parse_expiration
from roost.core.message import Message, Properties


def test_lower_ttl_wins() -> None:
    m = Message("", "q", Properties(expiration="30"), b"")
    assert deadline_ms(m, 100, 1000) == 1030
    assert deadline_ms(m, 10, 1000) == 1010
    assert deadline_ms(Message("", "q", Properties(), b""), None, 5) is None


def test_bad_expiration_refused() -> None:
    with pytest.raises(ValueError, match="invalid expiration '-1'"):
        parse_expiration("-1")
