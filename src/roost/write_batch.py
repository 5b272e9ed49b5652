"""What a session writes between two flushes of its socket (roost/plumbing.py).

Every frame of every protocol over TCP goes through ``WriteBatch.write``, once per
delivery, so it is compiled (docs/compiled.md) apart from the plumbing, an asyncio
Protocol that cannot be: interpreted, the write was a Python call of its own per
delivery (the largest interpreted cost left in bench scenario 1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

# a big backlog goes out at once rather than at the end of the turn
FLUSH_AT: Final = 256 * 1024


class WriteBatch:
    """The frames written since the last flush. What is written while a read is handled
    (``in_receive``) waits for the end of that read; what is written outside one asks
    for a flush at the next turn of the loop (``call_soon``), once; ``FLUSH_AT`` bytes
    flush at once."""

    def __init__(
        self,
        flush: Callable[[], object],
        call_soon: Callable[[Callable[[], object]], object],
    ) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0
        self.views = False  # a view was written: the batch goes with writelines
        self.in_receive = False
        self.flush_scheduled = False
        self._flush = flush
        self._call_soon = call_soon

    def write(self, data: bytes | memoryview) -> None:
        self.parts.append(data)
        self.size += len(data)
        # a view; not isinstance(data, memoryview), for which the compiled module looked
        # the name up in builtins on every write
        if type(data) is not bytes:
            self.views = True
        if self.size >= FLUSH_AT:
            self._flush()
        elif not self.in_receive and not self.flush_scheduled:
            self.flush_scheduled = True
            self._call_soon(self._flush)

    def flush_soon(self) -> None:
        """A flush at the end of the read being handled, else at the next turn."""
        if not self.in_receive and not self.flush_scheduled:
            self.flush_scheduled = True
            self._call_soon(self._flush)

    def take(self) -> list[bytes | memoryview]:
        """The parts written, which leave the batch (``size`` and ``views`` are theirs
        until this call)."""
        parts = self.parts
        self.parts = []
        self.size = 0
        self.views = False
        self.flush_scheduled = False
        return parts
