"""A message as a consumer, ``basic.get`` or a return hands it over."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roost.amqp import codec_methods as m


@dataclass(slots=True)
class Message:
    body: bytes
    properties: m.BasicProperties
    exchange: str = ""
    routing_key: str = ""
    delivery_tag: int = 0  # 0 for a returned message
    redelivered: bool = False
    consumer_tag: str = ""  # a delivery's consumer
    message_count: int | None = None  # basic.get-ok: messages left in the queue
    reply_code: int = 0  # basic.return: why the broker could not route it
    reply_text: str = ""

    @classmethod
    def from_content(cls, method: Any, properties: bytes, body: bytes) -> Message:
        """From a deliver, get-ok or return and its raw properties."""
        msg = cls(body, m.BasicProperties.decode(properties), method.exchange,
                  method.routing_key)
        kind = type(method)
        if kind is m.BasicReturn:
            msg.reply_code, msg.reply_text = method.reply_code, method.reply_text
            return msg
        msg.delivery_tag, msg.redelivered = method.delivery_tag, method.redelivered
        if kind is m.BasicDeliver:
            msg.consumer_tag = method.consumer_tag
        else:
            msg.message_count = method.message_count
        return msg
