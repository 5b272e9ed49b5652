"""Whatever bytes arrive, the MQTT reader yields packets or raises MQTTError, the same
whether fed whole or byte by byte; valid streams give the same packets however split."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.mqtt.codec import PacketReader, _NeedData, encode
from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import MQTT_5, Packet
from tests.mqtt.samples import LEVELS, client_packets, server_packets

ROLES = st.sampled_from(["server", "client"])
LEVEL = st.sampled_from(LEVELS)


def _run(chunks: list[bytes], role: str, level: int) -> tuple[list[Packet], int | None]:
    reader = PacketReader(role=role, protocol_level=level, max_packet_size=4096)
    out: list[Packet] = []
    try:
        for chunk in chunks:
            reader.feed(chunk)
            while not isinstance(packet := reader.next_packet(), _NeedData):
                out.append(packet)
    except MQTTError as exc:
        return out, exc.reason_code
    return out, None


# packets that start with a plausible fixed header, so the fuzz gets past the first byte
_FIRST_BYTES = st.sampled_from([0x10, 0x20, 0x30, 0x32, 0x34, 0x3B, 0x40, 0x50, 0x62, 0x70,
                                0x82, 0x90, 0xA2, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0])


@st.composite
def plausible_stream(draw: st.DrawFn) -> bytes:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        body = draw(st.binary(max_size=40))
        parts.append(bytes([draw(_FIRST_BYTES), len(body)]) + body)
    return b"".join(parts)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=200), plausible_stream()), role=ROLES, level=LEVEL)
def test_any_bytes_give_packets_or_mqtt_error_whole_and_byte_by_byte(
    data: bytes, role: str, level: int
) -> None:
    whole = _run([data], role, level)
    bytewise = _run([data[i : i + 1] for i in range(len(data))], role, level)
    assert whole == bytewise


@settings(max_examples=200)
@given(level=LEVEL, cuts=st.lists(st.integers(0, 5000), max_size=6))
def test_valid_streams_split_anywhere_give_the_same_packets(level: int, cuts: list[int]) -> None:
    for role, packets in (("server", client_packets(level)[1:]), ("client", server_packets(level))):
        stream = b"".join(encode(p, level) for p in packets)
        points = sorted({c % (len(stream) + 1) for c in cuts})
        chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
        assert _run(chunks, role, level) == (packets, None)


@settings(max_examples=300)
@given(level=LEVEL, index=st.integers(0, 10_000), byte=st.integers(0, 255))
def test_one_changed_byte_gives_packets_or_mqtt_error(level: int, index: int, byte: int) -> None:
    for role, packets in (("server", client_packets(level)[1:]), ("client", server_packets(level))):
        stream = bytearray(b"".join(encode(p, level) for p in packets))
        stream[index % len(stream)] = byte
        _run([bytes(stream)], role, level)  # no other exception escapes


def test_connect_fuzz_before_the_level_is_known() -> None:
    raw = encode(client_packets(MQTT_5)[0], MQTT_5)
    for i in range(len(raw)):
        for value in (0x00, 0x7F, 0xFF):
            mutated = raw[:i] + bytes([value]) + raw[i + 1 :]
            reader = PacketReader(role="server")
            reader.feed(mutated)
            with contextlib.suppress(MQTTError):
                reader.packets()
