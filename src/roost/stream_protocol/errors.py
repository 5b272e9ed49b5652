"""The stream codec's one error type, carrying the protocol's response code."""

from __future__ import annotations


class StreamProtocolError(Exception):
    """Malformed input. ``response_code`` is what the server closes the connection with
    (``Close`` with UNKNOWN_FRAME 0x0d or FRAME_TOO_LARGE 0x0e, as RabbitMQ does), or,
    for a sub-batch whose contents do not add up, the PublishError code."""

    def __init__(self, response_code: int, text: str) -> None:
        super().__init__(response_code, text)
        self.response_code = response_code
        self.text = text

    def __str__(self) -> str:
        from roost.stream_protocol.constants import response_name

        return f"0x{self.response_code:02X} {response_name(self.response_code)}: {self.text}"
