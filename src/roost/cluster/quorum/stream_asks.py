"""The stream protocol's queries about a replicated stream on a node with no copy of it
(QueryOffset, QueryPublisherSequence, StreamStats, ResolveOffsetSpec), asked of its
leader over the node link, as RabbitMQ answers them on any node of the cluster. A member
answers from its own copy (``stream_standin.py``); only a node outside the group asks.

The asking node sends ``StreamAsk`` (the question as JSON, ``core.stream_queries``'s
``answer_stream_question``) and its client's reply waits (the stream session reads
nothing more meanwhile). The asked node answers from the stream it leads, or from its
copy if a failover moved the leadership meanwhile. The link going down answers
``None`` (STREAM_NOT_AVAILABLE to the client, as RabbitMQ answers while no leader is
known); the client asks again. So does a question left unanswered for ``ASK_TIMEOUT``:
the link's silence check closes a link to a paused node after 6 s, but a reply lost any
other way must not hold the client's session for good.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.cluster.link import frames as f
from roost.core.errors import BrokerError
from roost.core.stream_queries import answer_stream_question

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.cluster.node import ClusterNode
    from roost.core.broker import Broker

Answered = Callable[[Any], None]

# Past the link's silence check (transport.DEAD_AFTER, 6 s), which answers first when the
# leader's node hangs; well under RabbitMQ's 60 s stream request timeout, which clients
# wait out before they give up themselves.
ASK_TIMEOUT = 15.0


class StreamAsks:
    """Registers itself on the node's frames and link losses."""

    def __init__(self, node: ClusterNode, broker: Broker) -> None:
        self.node = node
        self.broker = broker
        self._next_id = 0
        self.timeout = ASK_TIMEOUT
        # request -> (peer, answered, its timer)
        self._waiting: dict[int, tuple[str, Answered, asyncio.TimerHandle]] = {}
        node.frame_handlers.append(self.frame)
        node.link_down.append(self._link_down)

    def ask(self, home: str, vhost: str, stream: str, question: Any, answered: Answered) -> None:
        """``answered`` gets the leader's answer, or None; always later, not in this call."""
        link = self.node.links.link(home)
        loop = asyncio.get_running_loop()
        if link is None:
            loop.call_soon(answered, None)
            return
        self._next_id += 1
        timer = loop.call_later(self.timeout, self._expire, self._next_id)
        self._waiting[self._next_id] = (home, answered, timer)
        link.send(f.StreamAsk(self._next_id, vhost, stream, json.dumps(question).encode()))

    def frame(self, link: Link, frame: f.Frame) -> None:
        match frame:
            case f.StreamAsk():
                link.send(f.StreamAnswer(frame.request_id, self._answer(frame)))
            case f.StreamAnswer():
                found = self._waiting.pop(frame.request_id, None)
                if found is not None:
                    found[2].cancel()
                    found[1](json.loads(frame.answer))
            case _:
                pass

    def _answer(self, frame: f.StreamAsk) -> bytes:
        vhost = self.broker.catalog.vhosts.get(frame.vhost)
        queue = None if vhost is None else vhost.queues.get(frame.stream)
        answer: dict[str, Any]
        if queue is None or queue.deleted or queue.kind != "stream":
            answer = {"code": "not_found"}
        else:
            try:
                value = answer_stream_question(queue, json.loads(frame.question))
                answer = {"value": value}
            except (BrokerError, ValueError):  # no copy here either (moved meanwhile)
                answer = {"code": "not_available"}
        return json.dumps(answer).encode()

    def _expire(self, request_id: int) -> None:
        found = self._waiting.pop(request_id, None)
        if found is not None:
            found[1](None)

    def _link_down(self, link: Link, _why: str) -> None:
        for rid, (peer, answered, timer) in list(self._waiting.items()):
            if peer == link.peer:
                del self._waiting[rid]
                timer.cancel()
                answered(None)
