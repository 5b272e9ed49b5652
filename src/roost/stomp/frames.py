"""Sans-IO STOMP 1.0/1.1/1.2 frames: ``FrameParser.feed()`` then ``next_frame()``, and
``serialize()`` (written in ``frame_encoding``, importable from here as before).

Bytes in, ``Frame`` objects out (or ``NEED_DATA``); only malformed input raises, always
``StompParseError``, whose text becomes the ERROR frame's ``message`` header.

Wire rules handled here (STOMP 1.2 spec, "Augmented BNF"):
- EOLs (LF or CRLF) between frames are heart-beats and are skipped, including the
  newline many clients send after the terminating NUL.
- Header lines may end in CRLF; a repeated header keeps its first value.
- ``content-length`` bodies may contain NUL bytes; without it the body ends at the
  first NUL.
- Header escaping: none in 1.0; ``\\n \\c \\\\`` in 1.1; plus ``\\r`` in 1.2. CONNECT,
  STOMP and CONNECTED frames are never escaped (for compatibility with 1.0 peers).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import FunctionType
from typing import Final

# the encoding half lives in its own module; its names stay importable from here
from roost.stomp.frame_encoding import HEARTBEAT as HEARTBEAT
from roost.stomp.frame_encoding import UNESCAPED_COMMANDS as UNESCAPED_COMMANDS
from roost.stomp.frame_encoding import escape as escape
from roost.stomp.frame_encoding import header_lines as header_lines
from roost.stomp.frame_encoding import serialize as serialize


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()

VERSIONS: Final = ("1.0", "1.1", "1.2")
CLIENT_COMMANDS: Final = frozenset(
    {
        "CONNECT",
        "STOMP",
        "SEND",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "ACK",
        "NACK",
        "BEGIN",
        "COMMIT",
        "ABORT",
        "DISCONNECT",
    }
)
SERVER_COMMANDS: Final = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
_COMMANDS: Final = CLIENT_COMMANDS | SERVER_COMMANDS  # valid without a closer look


class StompParseError(Exception):
    """Malformed or over-limit input. ``message`` is the ERROR frame's message header."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class Frame:
    """One frame: its command, its (unescaped) headers, its body.

    A plain class, not a dataclass: mypyc compiles an ``__init__`` written here, while a
    dataclass's generated one stays interpreted (3.3% of the compiled server on STOMP 1/1,
    docs/compiled.md). Equality and repr are the dataclass's."""

    __slots__ = ("body", "command", "headers")

    def __init__(
        self, command: str, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        self.command = command
        self.headers: dict[str, str] = {} if headers is None else headers
        self.body = body

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return (
            self.command == other.command
            and self.headers == other.headers
            and self.body == other.body
        )

    def __repr__(self) -> str:
        return f"Frame(command={self.command!r}, headers={self.headers!r}, body={self.body!r})"

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name, default)


@dataclass(frozen=True)
class Limits:
    max_frame_size: int = 4 * 1024 * 1024  # headers + body, in bytes
    max_headers: int = 1000
    max_header_length: int = 8192  # one header line (or the command line), in bytes


_EOL_BYTES: Final = (10, 13)  # LF, CR
_ESCAPES_11: Final = {"n": "\n", "c": ":", "\\": "\\"}
_ESCAPES_12: Final = {**_ESCAPES_11, "r": "\r"}


def unescape(text: str, version: str) -> str:
    if version == "1.0" or "\\" not in text:
        return text
    table = _ESCAPES_12 if version == "1.2" else _ESCAPES_11
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            nxt = text[i + 1] if i + 1 < n else ""
            rep = table.get(nxt)
            if rep is None:
                raise StompParseError("invalid header escape", f"undefined escape '\\{nxt}'")
            out.append(rep)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# An unread tail up to this long is joined with the next read into one bytes (a copy of
# both); a longer one, a large frame arriving across reads, grows a bytearray in place
# rather than being copied again with every read.
_REBASE_MAX: Final = 65536


def _probe() -> None:
    """Compiled, a function is a builtin, not a ``FunctionType``: see ``NATIVE``."""


# Whether this module is compiled (as roost/amqp/frames.py's NATIVE): a loop over a
# ``bytes`` is then native indexing, where ``bytes.find`` is a Python call that builds
# an argument tuple (~160 ns, a quarter of parsing an ACK); interpreted, ``find`` wins.
NATIVE: Final = not isinstance(_probe, FunctionType)
_SCAN_MAX: Final = 48  # an ACK's head, as a rule; a longer one is found by ``find``


def _head_end(buf: bytes, pos: int) -> int:
    """Where the blank line ending the head that starts at ``pos`` is, or -1."""
    i = pos
    if NATIVE:
        stop = min(len(buf) - 1, pos + _SCAN_MAX)
        while i < stop:
            if buf[i] == 10 and buf[i + 1] == 10:
                return i
            i += 1
    return buf.find(b"\n\n", i)


def _starts_with_head(buf: bytes, pos: int, head: bytes) -> bool:
    """Whether the frame at ``pos`` has this head (whose first blank line then ends it:
    a head, up to its first blank line, does not end in LF)."""
    stop = pos + len(head)
    return stop + 1 < len(buf) and buf[stop] == 10 and buf[stop + 1] == 10 and (
        buf[pos:stop] == head
    )


_ACK_BY_ID: Final = b"ACK\nid:"  # a STOMP 1.2 ACK's head, before its number
_ACK_ID_AT: Final = len(_ACK_BY_ID)


def _ack_number_end(buf: bytes, pos: int, end: int) -> bool:
    """Whether the head from ``pos`` to ``end`` is ``ACK``, ``id:`` and a number alone:
    a consumer's ACK, parsed without splitting its head into lines (compiled only; the
    pure build's ``_plain_frame`` reads it as any other frame)."""
    start = pos + _ACK_ID_AT
    if end <= start:
        return False
    for k in range(_ACK_ID_AT):
        if buf[pos + k] != _ACK_BY_ID[k]:
            return False
    for i in range(start, end):
        c = buf[i]
        if c < 48 or c > 57:
            return False
    return True


class FrameParser:
    """Incremental parser. ``version`` selects the escaping and may change once the
    session is negotiated (CONNECT itself is never escaped)."""

    def __init__(self, limits: Limits | None = None, version: str = "1.2") -> None:
        self.limits = limits = limits or Limits()
        # heads this short cannot break the header limits: no need to measure each line
        self._plain_head_max = min(limits.max_header_length, limits.max_frame_size)
        self._plain_lines_max = limits.max_headers + 1
        self.version = version
        # the bytes a read delivered, as they came while every frame in them is whole (a
        # body is then one slice, one copy); a bytearray only while a frame is arriving
        # across reads, so a large frame is not copied again on every read
        self._buf: bytes | bytearray = b""
        self._pos = 0
        # headers of the frame being read, kept while its body is still arriving
        self._pending: tuple[str, dict[str, str], int, int | None] | None = None
        # the head of the last plain SEND, and its headers once it came twice in a row
        self._send_head = b""
        self._send_headers: dict[str, str] | None = None
        self.heartbeats = 0  # EOLs seen between frames

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        chunk = data if isinstance(data, bytes) else bytes(data)
        buf = self._buf
        pos = self._pos
        if pos >= len(buf):
            self._buf = chunk
            self._pos = 0
        elif len(buf) - pos <= _REBASE_MAX:
            # a small unread tail (a frame cut by the read): tail + chunk as one bytes, so
            # the plain path (bytes only) goes on reading; a pending head moves with it
            self._buf = buf[pos:] + chunk if isinstance(buf, bytes) else bytes(buf[pos:]) + chunk
            self._pos = 0
            pending = self._pending
            if pending is not None:
                command, headers, body_start, length = pending
                self._pending = (command, headers, body_start - pos, length)
        elif isinstance(buf, bytes):  # (positions stay: a pending head points into it)
            grown = bytearray(buf)
            grown += chunk
            self._buf = grown
        else:
            buf += chunk

    def next_frame(self) -> Frame | _NeedData:
        """The next whole frame, or NEED_DATA.

        Most frames are plain: whole in the buffer, LF line ends, no escapes, well under
        the limits. Those are read by ``_plain_frame``, with one ``find`` and no per-limit
        scans (the general path, which also says what is wrong, was a quarter of the
        STOMP server's time in bench/stomp_throughput.py); anything else (incomplete,
        CRLF, escaped, odd or bad) goes to ``_general_frame``."""
        buf = self._buf
        if self._pending is not None or not isinstance(buf, bytes):
            return self._general_frame()
        return self._plain_frame(buf, self._pos)

    def _plain_frame(self, buf: bytes, pos: int) -> Frame | _NeedData:
        # ``buf`` typed bytes: compiled, its slices, indexing, comparisons and decoding
        # are native, where ``bytes | bytearray`` made each a generic Python call
        # (the parser was a fifth of the compiled STOMP server)
        # (an EOL first, a heart-beat, leaves no command: the general path skips it)
        known = self._send_headers
        if known is not None and _starts_with_head(buf, pos, self._send_head):
            # a producer's SENDs repeat their head: parsed once (issue 27), each frame
            # still gets a dict of its own (the session changes some, stomp/sending.py)
            end = pos + len(self._send_head)
            command = "SEND"
            headers = known.copy()
        else:
            end = _head_end(buf, pos)
            if end < 0 or end - pos > self._plain_head_max:
                return self._general_frame()
            if NATIVE and self._plain_lines_max > 1 and _ack_number_end(buf, pos, end):
                number = buf[pos + _ACK_ID_AT : end].decode()
                return self._body(buf, pos, end, "ACK", {"id": number})
            head = buf[pos:end]
            try:
                text = head.decode("utf-8")
            except UnicodeDecodeError:
                return self._general_frame()
            if "\r" in text or "\\" in text:
                return self._general_frame()
            lines = text.split("\n")
            command = lines[0]
            if command not in _COMMANDS or len(lines) > self._plain_lines_max:
                return self._general_frame()
            headers = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    return self._general_frame()
                if name not in headers:  # repeated headers: the first one wins
                    headers[name] = value
            if command == "SEND":
                if head == self._send_head:  # seen twice in a row: kept
                    self._send_headers = headers.copy()
                else:  # (a head that changes every time costs no copy)
                    self._send_head = head
                    self._send_headers = None
        return self._body(buf, pos, end, command, headers)

    def _body(
        self, buf: bytes, pos: int, end: int, command: str, headers: dict[str, str]
    ) -> Frame | _NeedData:
        """The plain frame whose head runs from ``pos`` to ``end``, with its body."""
        start = end + 2
        length = headers.get("content-length")
        if length is None:
            # (an empty body, as a rule: no search)
            end = start if start < len(buf) and buf[start] == 0 else buf.find(b"\x00", start)
            if end < 0:
                return self._general_frame()
        elif length.isdigit():
            end = start + int(length)
            if end >= len(buf) or buf[end] != 0:
                return self._general_frame()
        else:
            return self._general_frame()
        if end - pos > self.limits.max_frame_size:
            return self._general_frame()
        body = buf[start:end]
        self._pos = end + 1
        if end >= 65536:
            self._compact()
        return Frame(command, headers, body)

    def _general_frame(self) -> Frame | _NeedData:
        buf = self._buf
        if self._pending is None:
            pos = self._pos
            if pos < len(buf) and buf[pos] in _EOL_BYTES:
                pos = self._pos = self._skip_eols(buf, pos)
            if pos >= len(buf):
                self._compact()
                return NEED_DATA
            head = self._read_head(buf, pos)
            if head is None:
                return NEED_DATA
            self._pending = head
        command, headers, body_start, length = self._pending
        frame_start = self._pos
        limit = self.limits.max_frame_size
        if length is not None:
            end = body_start + length
            if end - frame_start > limit:
                raise StompParseError(
                    "frame too large", f"content-length {length} exceeds the limit of {limit}"
                )
            if len(buf) <= end:
                return NEED_DATA
            if buf[end] != 0:
                raise StompParseError("frame not terminated by NUL after content-length body")
        else:
            end = buf.find(b"\x00", body_start)
            if end < 0:
                if len(buf) - frame_start > limit:
                    raise StompParseError("frame too large", f"frames are limited to {limit} bytes")
                return NEED_DATA
            if end - frame_start > limit:
                raise StompParseError("frame too large", f"frames are limited to {limit} bytes")
        body = bytes(buf[body_start:end])
        self._pos = pos = end + 1
        self._pending = None
        if pos > 65536 or pos == len(buf):
            self._compact()
        return Frame(command, headers, body)

    def _compact(self) -> None:
        buf = self._buf
        if self._pos == len(buf):
            self._buf = b""
            self._pos = 0
        elif self._pos > 65536 and type(buf) is bytearray:
            del buf[: self._pos]
            self._pos = 0

    def _skip_eols(self, buf: bytes | bytearray, pos: int) -> int:
        n = len(buf)
        while pos < n:
            c = buf[pos]
            if c == 10:
                pos += 1
            elif c == 13 and pos + 1 < n and buf[pos + 1] == 10:
                pos += 2
            else:
                break
            self.heartbeats += 1
        return pos

    def _read_head(
        self, buf: bytes | bytearray, pos: int
    ) -> tuple[str, dict[str, str], int, int | None] | None:
        """Command and headers, or None when the blank line has not arrived yet.

        The head ends at the first empty line: LF LF, or LF CR LF. It is found with two
        ``find`` calls and decoded in one piece (per-line scanning was a fifth of the
        STOMP server's time in bench/stomp_throughput.py)."""
        limits = self.limits
        end = buf.find(b"\n\n", pos)
        crlf = buf.find(b"\n\r\n", pos, end + 2 if end >= 0 else len(buf))
        if crlf >= 0 and (end < 0 or crlf < end):
            end, body_start = crlf, crlf + 3
        elif end >= 0:
            body_start = end + 2
        else:
            self._check_partial_head(buf, pos)
            return None
        if end - pos > limits.max_frame_size:
            raise StompParseError("frame too large")
        try:
            text = buf[pos:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StompParseError("header is not valid UTF-8") from exc
        lines = text.split("\n")
        if "\r" in text:
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        if len(lines) > limits.max_headers + 1:
            raise StompParseError(
                "too many headers", f"frames may carry at most {limits.max_headers} headers"
            )
        if end - pos > limits.max_header_length and any(
            len(line.encode()) > limits.max_header_length for line in lines
        ):
            raise StompParseError(
                "header too long",
                f"header lines are limited to {limits.max_header_length} bytes",
            )
        texts = iter(lines)
        command = next(texts)
        if command not in _COMMANDS and (
            not command or not command.isascii() or not command.isalpha()
        ):
            raise StompParseError("malformed frame", f"invalid command line {command[:40]!r}")
        version = "1.0" if command in UNESCAPED_COMMANDS else self.version
        escaped = version != "1.0" and "\\" in text
        headers: dict[str, str] = {}
        for line in texts:
            name, sep, value = line.partition(":")
            if not sep:
                raise StompParseError("malformed header", f"header line without ':': {line[:40]!r}")
            if escaped:
                name = unescape(name, version)
                value = unescape(value, version)
            if name not in headers:  # repeated headers: the first one wins
                headers[name] = value
        length: int | None = None
        raw_length = headers.get("content-length")
        if raw_length is not None:
            raw_length = raw_length.strip()
            if not raw_length.isdigit():
                raise StompParseError("invalid content-length", repr(raw_length))
            length = int(raw_length)
        return command, headers, body_start, length

    def _check_partial_head(self, buf: bytes | bytearray, pos: int) -> None:
        """Limits that an incomplete head already breaks."""
        limits = self.limits
        nl = buf.rfind(b"\n", pos)
        if len(buf) - (nl + 1 if nl >= 0 else pos) > limits.max_header_length:
            raise StompParseError(
                "header too long",
                f"header lines are limited to {limits.max_header_length} bytes",
            )
        if len(buf) - pos > limits.max_frame_size:
            raise StompParseError("frame too large")
        if nl >= 0 and buf.count(b"\n", pos) > limits.max_headers + 1:
            raise StompParseError(
                "too many headers", f"frames may carry at most {limits.max_headers} headers"
            )
