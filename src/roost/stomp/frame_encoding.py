"""Sans-IO STOMP frame encoding: ``serialize()`` a whole frame, ``header_lines()`` for the
parts an adapter encodes once, and the header ``escape()`` each uses (the parsing half,
with ``unescape()``, is ``frames``).

Header escaping: none in 1.0; ``\\n \\c \\\\`` in 1.1; plus ``\\r`` in 1.2. CONNECT, STOMP and
CONNECTED frames are never escaped (for compatibility with 1.0 peers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

UNESCAPED_COMMANDS: Final = frozenset({"CONNECT", "STOMP", "CONNECTED"})


def escape(text: str, version: str) -> str:
    if version == "1.0":
        return text
    # most values need nothing: four C-level scans are cheaper than four replace() calls
    if "\\" not in text and "\n" not in text and ":" not in text and "\r" not in text:
        return text
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")
    if version == "1.2":
        text = text.replace("\r", "\\r")
    return text


def serialize(
    command: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    body: bytes = b"",
    *,
    version: str = "1.2",
    content_length: bool = True,
) -> bytes:
    """One frame as bytes. ``content_length`` adds the header when there is a body (so
    bodies may hold NUL bytes) unless the caller gave one."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    esc_version = "1.0" if command in UNESCAPED_COMMANDS else version
    parts = [command, "\n"]
    has_length = False
    for name, value in items:
        if name == "content-length":
            has_length = True
        parts.append(escape(name, esc_version))
        parts.append(":")
        parts.append(escape(str(value), esc_version))
        parts.append("\n")
    if content_length and body and not has_length:
        parts.append(f"content-length:{len(body)}\n")
    parts.append("\n")
    return "".join(parts).encode("utf-8") + body + b"\x00"


def header_lines(headers: Iterable[tuple[str, str]], version: str = "1.2") -> bytes:
    """Header lines, each ending in LF, escaped for ``version``: parts of a frame that an
    adapter encodes once and reuses."""
    return "".join(
        f"{escape(name, version)}:{escape(value, version)}\n" for name, value in headers
    ).encode("utf-8")


HEARTBEAT: Final = b"\n"
