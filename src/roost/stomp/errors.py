"""The one error a STOMP session raises for a refused frame: an ERROR frame with
``message`` as its header and ``detail`` as its body follows, then the close."""

from __future__ import annotations


class StompError(Exception):
    """A refused frame: ERROR with ``message`` and ``detail`` as body, then close."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
