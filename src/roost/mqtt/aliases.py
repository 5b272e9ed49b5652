"""Server-to-client topic aliases (MQTT 5 spec 3.3.2.3.4).

A client that sends Topic Alias Maximum > 0 in its CONNECT lets the server name a topic
by a number after the first PUBLISH that carried both. Roost gives each new topic an
alias while there is room and then reuses the least recently used one (the PUBLISH that
re-assigns it carries the topic again), so a subscriber to a few busy topics gets every
PUBLISH after the first without its topic name.
"""

from __future__ import annotations

from collections import OrderedDict

from roost.mqtt.packets import Publish


class OutgoingAliases:
    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self._by_topic: OrderedDict[str, int] = OrderedDict()  # least recently used first
        self._next = 1  # aliases are 1..maximum
        self._free: list[int] = []  # aliases given back by ``undo``

    def apply(self, packet: Publish) -> str | None:
        """Give ``packet`` an alias (and drop its topic when the client knows the alias
        already). Returns the topic newly assigned, for ``undo`` should the packet not
        be sent after all; None otherwise."""
        topic = packet.topic
        alias = self._by_topic.get(topic)
        if alias is not None:
            self._by_topic.move_to_end(topic)
            packet.properties.topic_alias = alias
            packet.topic = ""
            return None
        if self._free:
            alias = self._free.pop()
        elif self._next <= self.maximum:
            alias = self._next
            self._next += 1
        else:
            _, alias = self._by_topic.popitem(last=False)
        self._by_topic[topic] = alias
        packet.properties.topic_alias = alias
        return topic

    def undo(self, topic: str) -> None:
        """The packet that would have told the client this alias was not sent (it was
        too large for the client): the client never learned it."""
        alias = self._by_topic.pop(topic, None)
        if alias is not None:
            self._free.append(alias)
