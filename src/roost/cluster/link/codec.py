"""Sans-IO framing of the node-to-node link: bytes in, frames out, and back.

A frame is ``u32 size`` (of what follows), ``u8 kind``, then the frame's fields in the
order of its dataclass (``frames.py``), big-endian:

- ``u8 u16 u32 u64``, and bools as ``u8`` 0/1, enums as ``u8``;
- a name: ``u8 length`` + UTF-8 (AMQP's short string);
- bytes: ``u32 length`` + bytes; lists: ``u16`` (names) or ``u32`` (bytes) count + items.

Consecutive fixed-size fields are packed by one precompiled ``struct.Struct``. Many frames
go out in one write: ``Encoder`` gathers them and ``take()`` joins them once.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from typing import Any, Final

from roost.cluster.link import frames as f
from roost.cluster.link.fast import DECODERS, ENCODERS, Truncated

HEADER = struct.Struct("!IB")
DEFAULT_MAX_FRAME = 256 * 1024 * 1024  # above --max-message-size's 128 MiB and its headers


class NeedData(enum.Enum):
    NEED_DATA = 0


NEED_DATA: Final = NeedData.NEED_DATA


class LinkError(Exception):
    """Malformed link input; the link is closed and re-established."""


# field kinds: struct codes for fixed sizes; s = name, b = bytes, S = names, L = byte list
SCHEMA: dict[type, tuple[f.Kind, str, tuple[type | None, ...]]] = {}


def _declare(cls: type, kind: f.Kind, codes: str, enums: tuple[type | None, ...] = ()) -> None:
    SCHEMA[cls] = (kind, codes, enums + (None,) * (len(codes) - len(enums)))


_declare(f.Hello, f.Kind.HELLO, "sQB")
_declare(f.Heartbeat, f.Kind.HEARTBEAT, "")
_declare(f.Publish, f.Kind.PUBLISH, "QBsSssbb")
_declare(f.PublishResult, f.Kind.PUBLISH_RESULT, "QBs", (None, f.Outcome))
_declare(f.Consume, f.Kind.CONSUME, "QsssIBb")
_declare(f.ConsumeOk, f.Kind.CONSUME_OK, "QQ")
_declare(f.Cancel, f.Kind.CANCEL, "QHs")
_declare(f.Deliver, f.Kind.DELIVER, "QQBIssbb")
_declare(f.Settle, f.Kind.SETTLE, "QBBQ", (None, f.SettleOp))
_declare(f.Credit, f.Kind.CREDIT, "QI")
_declare(f.Get, f.Kind.GET, "Qss?")
_declare(f.GetResult, f.Kind.GET_RESULT, "Q?QBIHssbb")
_declare(f.Flow, f.Kind.FLOW, "ss?")
_declare(f.Applied, f.Kind.APPLIED, "Q")
_declare(f.Replicate, f.Kind.REPLICATE, "ssQQQL")
_declare(f.ReplicateAck, f.Kind.REPLICATE_ACK, "ssQQ?")
_declare(f.QueueOp, f.Kind.QUEUE_OP, "QBss", (None, f.QueueOpKind))
_declare(f.QueueOpResult, f.Kind.QUEUE_OP_RESULT, "QHQIs")
_declare(f.Confirmed, f.Kind.CONFIRMED, "b")
_declare(f.Acked, f.Kind.ACKED, "b")
_declare(f.Fenced, f.Kind.FENCED, "?")
_declare(f.StreamAsk, f.Kind.STREAM_ASK, "Qssb")
_declare(f.StreamAnswer, f.Kind.STREAM_ANSWER, "Qb")

FIXED = set("BHIQ?")
Plan = list[tuple[str, Any]]  # ("fixed", Struct) or (code, None), in field order


def _plan(codes: str) -> Plan:
    plan: Plan = []
    run = ""
    for code in codes:
        if code in FIXED:
            run += code
            continue
        if run:
            plan.append(("fixed", struct.Struct("!" + run.replace("?", "B"))))
            run = ""
        plan.append((code, None))
    if run:
        plan.append(("fixed", struct.Struct("!" + run.replace("?", "B"))))
    return plan


PLANS = {cls: _plan(codes) for cls, (_kind, codes, _enums) in SCHEMA.items()}
BY_KIND = {kind: cls for cls, (kind, _codes, _enums) in SCHEMA.items()}
FIELDS = {cls: tuple(x.name for x in dataclasses.fields(cls)) for cls in SCHEMA}
_U8 = struct.Struct("!B")
_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")


def _name(value: str) -> bytes:
    raw = value.encode()
    if len(raw) > 255:
        raise ValueError(f"name longer than 255 bytes: {value[:40]!r}…")
    return _U8.pack(len(raw)) + raw


def encode_parts(frame: f.Frame) -> list[bytes]:
    """The frame as a list of buffers (a body is one of them, not copied here)."""
    cls = type(frame)
    fast = ENCODERS.get(cls)
    if fast is not None:
        return fast(frame)
    kind, _codes, _enums = SCHEMA[cls]
    values = [getattr(frame, name) for name in FIELDS[cls]]
    parts: list[bytes] = [b""]
    size = 1
    i = 0
    for code, packer in PLANS[cls]:
        if code == "fixed":
            n = len(packer.format) - 1
            raw = packer.pack(*(int(v) for v in values[i : i + n]))
            i += n
            parts.append(raw)
            size += len(raw)
            continue
        value = values[i]
        i += 1
        if code == "s":
            raw = _name(value)
            parts.append(raw)
            size += len(raw)
        elif code == "b":
            parts.append(_U32.pack(len(value)))
            parts.append(value)
            size += 4 + len(value)
        elif code == "S":
            raw = _U16.pack(len(value)) + b"".join(_name(v) for v in value)
            parts.append(raw)
            size += len(raw)
        else:  # "L"
            parts.append(_U32.pack(len(value)))
            size += 4
            for item in value:
                parts.append(_U32.pack(len(item)))
                parts.append(item)
                size += 4 + len(item)
    parts[0] = HEADER.pack(size, kind)
    return parts


def encode(frame: f.Frame) -> bytes:
    return b"".join(encode_parts(frame))


# a run of batched frames is closed at this size (well below any max_frame)
BATCH_BYTES = 1024 * 1024


class Encoder:
    """Frames gathered for one write (the transport takes them once per loop turn).

    Consecutive ``Publish`` and ``Deliver`` frames go as one ``Batch``: each is encoded
    at once, as it would be alone, and a run of two or more gets the Batch header in
    front when the run ends (any other frame, ``take``, or ``BATCH_BYTES``). The bytes
    cost 5 more a run; the receiver decodes and dispatches one frame for the run, where
    the link otherwise spent ~2 µs a message in the reader and the frame handlers.
    """

    __slots__ = ("_run", "_run_count", "_run_size", "batching", "parts", "size")

    def __init__(self, *, batching: bool = True) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.batching = batching  # False towards a peer that said it cannot read a Batch
        self._run = -1  # index in parts of the open run's header slot; -1: none
        self._run_size = 0
        self._run_count = 0

    def add(self, frame: f.Frame) -> None:
        parts = encode_parts(frame)
        if isinstance(frame, f.BATCHED):
            return self.add_batched(parts, sum(map(len, parts)))
        self._close_run()
        self.parts += parts
        self.size += sum(map(len, parts))

    def add_batched(self, parts: list[bytes], size: int) -> None:
        """A Publish or Deliver frame already encoded (``size`` bytes in ``parts``)."""
        if self.batching:
            if self._run < 0:
                self._run = len(self.parts)
                self.parts.append(b"")  # the Batch header, if the run gets a second frame
            self._run_size += size
            self._run_count += 1
            self.parts += parts
            self.size += size + (HEADER.size if self._run_count == 2 else 0)
            if self._run_size >= BATCH_BYTES:
                self._close_run()
            return
        self.parts += parts
        self.size += size

    def _close_run(self) -> None:
        if self._run < 0:
            return
        if self._run_count > 1:
            self.parts[self._run] = HEADER.pack(1 + self._run_size, f.Kind.BATCH)
        self._run = -1
        self._run_size = self._run_count = 0

    def take(self) -> bytes:
        self._close_run()
        data = b"".join(self.parts)
        self.parts.clear()
        self.size = 0
        return data

    def __bool__(self) -> bool:
        return bool(self.parts)


def decode_payload(kind: int, payload: memoryview) -> f.Frame:
    cls = BY_KIND.get(kind)  # type: ignore[call-overload]
    if cls is None:
        raise LinkError(f"unknown link frame kind {kind}")
    _kind, _codes, enums = SCHEMA[cls]
    values: list[Any] = []
    pos = 0
    end = len(payload)
    try:
        for code, packer in PLANS[cls]:
            if code == "fixed":
                values.extend(packer.unpack_from(payload, pos))
                pos += packer.size
            elif code == "s":
                pos, value = _read_name(payload, pos)
                values.append(value)
            elif code == "b":
                pos, raw = _read_bytes(payload, pos, end)
                values.append(raw)
            elif code == "S":
                (count,) = _U16.unpack_from(payload, pos)
                pos += 2
                names = []
                for _ in range(count):
                    pos, value = _read_name(payload, pos)
                    names.append(value)
                values.append(names)
            else:  # "L"
                (count,) = _U32.unpack_from(payload, pos)
                pos += 4
                if count > end - pos:
                    raise LinkError(f"{cls.__name__}: {count} entries cannot fit")
                items = []
                for _ in range(count):
                    pos, raw = _read_bytes(payload, pos, end)
                    items.append(raw)
                values.append(items)
    except struct.error:
        raise LinkError(f"{cls.__name__} frame truncated") from None
    if pos != end:
        raise LinkError(f"{cls.__name__} frame has {end - pos} bytes past its fields")
    for i, enum_cls in enumerate(enums):
        if enum_cls is not None:
            try:
                values[i] = enum_cls(values[i])
            except ValueError:
                raise LinkError(f"{cls.__name__}: bad {FIELDS[cls][i]} {values[i]}") from None
    for i, code in enumerate(SCHEMA[cls][1]):
        if code == "?":
            if values[i] not in (0, 1):
                raise LinkError(f"{cls.__name__}: {FIELDS[cls][i]} must be 0 or 1")
            values[i] = bool(values[i])
    frame: f.Frame = cls(*values)
    return frame


def _read_name(data: memoryview, pos: int) -> tuple[int, str]:
    if pos >= len(data):
        raise LinkError("name runs past the frame")
    size = data[pos]
    end = pos + 1 + size
    if end > len(data):
        raise LinkError("name runs past the frame")
    try:
        return end, str(data[pos + 1 : end], "utf-8")
    except UnicodeDecodeError:
        raise LinkError("name is not UTF-8") from None


def _read_bytes(data: memoryview, pos: int, end: int) -> tuple[int, bytes]:
    (size,) = _U32.unpack_from(data, pos)
    start = pos + 4
    if start + size > end:
        raise LinkError("bytes run past the frame")
    return start + size, bytes(data[start : start + size])


class LinkReader:
    """``feed`` what the socket gave, then call ``next_frame`` until ``NEED_DATA``.

    Frames are decoded in place from the bytes the socket handed over, so a message body
    is copied once, from the read into its own ``bytes`` (the reader used to gather every
    read into a ``bytearray`` and copy a body out of it twice: 2 of a forwarded message's
    3 copies per node). Only a frame cut by the end of a read is gathered (``_head``)
    until the reads that complete it have come.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = b""  # the latest read, decoded in place from ``_pos``
        self._pos = 0
        self._head = bytearray()  # the start of a frame that runs past the reads so far

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos < len(self._buf):  # the caller stopped before NEED_DATA: keep the rest
            self._buf = self._buf[self._pos :] + bytes(data)
        else:
            self._buf = data if type(data) is bytes else bytes(data)
        self._pos = 0

    def next_frame(self) -> f.Frame | NeedData:
        if self._head:
            return self._completed()
        buf, pos = self._buf, self._pos
        left = len(buf) - pos
        if left < 4:
            if left:
                self._hold()
            return NEED_DATA
        end = pos + 4 + self._size(_U32.unpack_from(buf, pos)[0])
        if len(buf) < end:
            self._hold()
            return NEED_DATA
        frame = _decode(buf, pos, end)
        self._pos = end
        return frame

    def _size(self, size: int) -> int:
        if size < 1:
            raise LinkError("link frame of size 0")
        if size > self.max_frame:
            raise LinkError(f"link frame of {size} bytes is larger than {self.max_frame}")
        return size

    def _hold(self) -> None:
        """The rest of this read starts a frame that later reads complete."""
        with memoryview(self._buf) as view:
            self._head += view[self._pos :]
        self._pos = len(self._buf)

    def _completed(self) -> f.Frame | NeedData:
        """The held frame's next bytes from this read; the frame once it is whole."""
        head, buf, pos = self._head, self._buf, self._pos
        want = 4 if len(head) < 4 else 4 + _U32.unpack_from(head, 0)[0]
        while True:
            take = min(want - len(head), len(buf) - pos)
            with memoryview(buf) as view:
                head += view[pos : pos + take]
            pos += take
            self._pos = pos
            if len(head) < want:
                return NEED_DATA
            if want > 4:
                break
            want = 4 + self._size(_U32.unpack_from(head, 0)[0])
        with memoryview(head) as view:
            frame = _decode(view, 0, len(head))
        head.clear()
        return frame


def _decode(buf: bytes | memoryview, pos: int, end: int) -> f.Frame:
    """The whole frame at ``buf[pos:end]`` (size, kind, fields)."""
    kind = buf[pos + 4]
    fast = DECODERS.get(kind)
    if fast is not None:
        try:
            frame, stop = fast(buf, pos + HEADER.size, end)
        except Truncated as exc:
            raise LinkError(str(exc)) from None
        if stop != end:
            raise LinkError(f"{f.Kind(kind).name} frame has {end - stop} bytes past its fields")
        return frame
    with memoryview(buf) as view:
        return decode_payload(kind, view[pos + HEADER.size : end])


def frames_of(data: bytes) -> list[f.Frame]:
    """Every frame in ``data`` (tests, tools); raises on a partial last frame."""
    reader = LinkReader()
    reader.feed(data)
    out: list[f.Frame] = []
    while (frame := reader.next_frame()) is not NEED_DATA:
        assert not isinstance(frame, NeedData)
        out.append(frame)
    if reader._head or reader._pos != len(reader._buf):
        raise LinkError("partial frame at the end")
    return out
