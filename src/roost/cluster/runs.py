"""The home node's side of a Batch of forwarded publishes: each as ``Home.publish`` would
take it, but the confirms of those that only wait for the store share one durability wait
and one callback (in an in-process profile, a forwarded publish's own Completion, closure
and callback were a third of the home node's link CPU for it)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from roost.cluster.link import frames as f
from roost.cluster.wire import message_cached
from roost.core.completion import Completion
from roost.core.exchanges.offsets import OFFSETS_EXCHANGE

if TYPE_CHECKING:
    from roost.cluster.home import Home, _Peer
    from roost.cluster.link.transport import Link
    from roost.core.errors import BrokerError


def publish_run(home: Home, link: Link, frames: list[f.Publish]) -> None:
    """A Batch's publishes, in order. A publish whose queue issued a pending operation
    (a replicated queue's majority) keeps its own wait, so its failure nacks it alone;
    a refused or unroutable one is answered at once, as alone."""
    broker = home.broker
    store, pending = broker.message_store, broker.pending
    appends = store.appends
    vhosts = broker.catalog.vhosts
    waiting: list[tuple[_Peer, int]] = []
    last: tuple[str, list[str]] | None = None  # a run is mostly one queue's
    for frame in frames:
        if last is None or frame.vhost != last[0] or frame.queues != last[1]:
            vhost = vhosts.get(frame.vhost)
            if vhost is None or frame.exchange == OFFSETS_EXCHANGE or len(frame.queues) != 1:
                last = None
                home.publish(link, frame)  # the rare shapes take the general path
                continue
            queue = vhost.queues.get(frame.queues[0])
            peer = home._peer(link, frame)
            last = (frame.vhost, frame.queues)
        elif frame.exchange == OFFSETS_EXCHANGE:
            last = None
            home.publish(link, frame)
            continue
        pid = frame.publish_id
        if queue is None or queue.remote or queue.deleted:
            if pid:
                text = "no such queue on its home node"
                peer.answer(f.PublishResult(pid, f.Outcome.UNROUTABLE, text))
            continue
        message = message_cached(
            peer.properties, frame.exchange, frame.routing_key, frame.properties, frame.body
        )
        marks = (store.appends, pending.issued)
        if not queue.push(message):
            if pid:
                peer.answer(f.PublishResult(pid, f.Outcome.NACKED, queue.refusal))
            continue
        if queue.flow.congested:
            queue.flow.hold(peer.publisher)
        if not pid:
            continue
        if pending.issued != marks[1]:  # its own wait: the store and the majority
            own = Completion(store, pending, marks=marks)
            if not own.then(partial(_answer, peer, pid)):
                peer.confirm(pid)
            continue
        waiting.append((peer, pid))
    if not waiting:
        return
    if not Completion(store, None, marks=(appends, 0)).then(partial(_answer_all, waiting)):
        _answer_all(waiting, None)


def _answer(peer: _Peer, publish_id: int, error: BrokerError | None) -> None:
    if error is None:
        peer.confirm(publish_id)
    else:
        peer.answer(f.PublishResult(publish_id, f.Outcome.NACKED, str(error)))


def _answer_all(waiting: list[tuple[_Peer, int]], error: BrokerError | None) -> None:
    for peer, publish_id in waiting:
        _answer(peer, publish_id, error)
