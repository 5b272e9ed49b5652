"""Message deadline: the lower of queue TTL and per-message expiration; RabbitMQ's
reasons for a malformed expiration."""

import pytest

from roost.core.errors import PreconditionFailed
from roost.core.features.ttl import deadline, deadline_ms, parse_expiration
from roost.core.message import Message, Properties


def test_lower_ttl_wins() -> None:
    m = Message("", "q", Properties(expiration="30"), b"")
    assert deadline_ms(m, 100, 1000) == 1030
    assert deadline_ms(m, 10, 1000) == 1010
    assert deadline_ms(Message("", "q", Properties(), b""), None, 5) is None
    assert deadline(m, 100, 1.0) == pytest.approx(1.03)
    assert deadline(Message("", "q", Properties(), b""), None, 1.0) == 0.0
    assert deadline(Message("", "q", Properties(), b""), 0, 0.0) > 0.0  # zero TTL: a deadline


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("-1", "{value_negative,-1}"),
        ("abc", "no_integer"),
        ("", "no_integer"),
        (" 5", "no_integer"),
        ("1.5", '{leftover_string,".5"}'),
        ("99999999999999999999", "{value_too_large,99999999999999999999}"),
    ],
)
def test_bad_expiration_refused(text: str, reason: str) -> None:
    with pytest.raises(PreconditionFailed) as err:
        parse_expiration(text)
    assert err.value.text == f"invalid expiration '{text}': {reason}"


def test_good_expiration() -> None:
    assert parse_expiration("0") == 0
    assert parse_expiration("+7") == 7  # Erlang's string:to_integer takes a sign
    assert parse_expiration(str(2**32 - 1)) == 2**32 - 1
