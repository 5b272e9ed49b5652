"""Hypothesis strategies for AMQP values, from the argument types the generated classes carry."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import strategies as st

from roost.amqp import codec_methods as m

UINT = {"octet": 8, "short": 16, "long": 32, "longlong": 64, "timestamp": 64}


def shortstr(alphabet: st.SearchStrategy[str] | None = None, min_size: int = 0) -> Any:
    text = st.text(alphabet, min_size=min_size, max_size=40) if alphabet else st.text(
        min_size=min_size, max_size=80
    )
    return text.filter(lambda s: len(s.encode()) <= 255)


# Field values our codec reads back as the same Python value.
scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**6),
                max_value=10**6),
    st.text(max_size=30),
    st.binary(max_size=30),
    st.datetimes(
        min_value=datetime.datetime(1970, 1, 1),
        max_value=datetime.datetime(9999, 12, 31),
        timezones=st.just(datetime.UTC),
    ).map(lambda d: d.replace(microsecond=0)),
    st.none(),
)
keys = shortstr()
field_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)
    ),
    max_leaves=12,
)
tables = st.dictionaries(keys, field_values, max_size=6)

# The subset on which pamqp's table mapping agrees with ours: pamqp writes floats as
# float32 ('f'), only bytearray as 'x', has no Decimal/bytes/datetime encoders worth
# comparing, truncates keys past 128 bytes.
pamqp_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(width=32, allow_nan=False),
    st.text(max_size=30),
    st.binary(max_size=30).map(bytearray),
    st.none(),
)
pamqp_keys = st.text(max_size=20).filter(lambda s: len(s.encode()) <= 128)
pamqp_tables = st.dictionaries(
    pamqp_keys,
    st.recursive(
        pamqp_scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(pamqp_keys, inner, max_size=3)
        ),
        max_leaves=8,
    ),
    max_size=5,
)


def argument(kind: str, *, oracle: bool = False) -> Any:
    if kind == "bit":
        return st.booleans()
    if kind in UINT:
        bits = UINT[kind]
        if oracle and bits == 64:  # pamqp packs longlong as signed
            bits = 63
        return st.integers(0, 2**bits - 1)
    if kind == "shortstr":
        return shortstr()
    if kind == "longstr":  # pamqp writes only str
        return st.text(max_size=40).map(str.encode) if oracle else st.binary(max_size=300)
    if kind == "table":
        return pamqp_tables if oracle else tables
    raise AssertionError(kind)


def method_kwargs(cls: type[m.Method], *, oracle: bool = False) -> Any:
    pairs = zip(cls.ARGUMENTS, cls.KINDS, strict=True)
    return st.fixed_dictionaries({name: argument(kind, oracle=oracle) for name, kind in pairs})


def properties(*, oracle: bool = False) -> Any:
    text = shortstr(min_size=1) if oracle else shortstr()  # pamqp drops '' properties
    octet = st.integers(1, 2) if oracle else st.integers(0, 255)  # pamqp: delivery_mode 1|2
    fields = {
        "content_type": text,
        "content_encoding": text,
        "headers": pamqp_tables if oracle else tables,
        "delivery_mode": octet,
        "priority": st.integers(0, 255),
        "correlation_id": text,
        "reply_to": text,
        "expiration": text,
        "message_id": text,
        # pamqp reads a timestamp above 0xFFFFFFFF as milliseconds: stay at or below it
        "timestamp": st.integers(0, 2**32 - 1) if oracle else st.integers(0, 2**64 - 1),
        "type": text,
        "user_id": text,
        "app_id": text,
        "cluster_id": st.just("") if oracle else text,  # pamqp: must be empty
    }
    return st.fixed_dictionaries({}, optional=fields)

