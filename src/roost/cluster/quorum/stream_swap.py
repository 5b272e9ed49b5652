"""A stream member promoted to leader: its copy of the log becomes the stream in place
of its stand-in (``stream_groups.StreamGroups._promote``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roost.cluster.remote_changes import take_place
from roost.core.errors import BrokerError
from roost.core.queues.stream import StreamQueue

if TYPE_CHECKING:
    from roost.cluster.quorum.stream_groups import StreamGroups
    from roost.cluster.quorum.stream_standin import StreamStandIn
    from roost.core.vhost import VHost


def swap_in_copy(groups: StreamGroups, vhost: VHost, stand_in: StreamStandIn) -> StreamQueue:
    """The member's copy of the log becomes the stream here, in the stand-in's place
    (its bindings and consumers move over)."""
    consumers = stand_in.moving()  # read through the old leader: moved over
    groups.promoting = True
    try:
        queue = StreamQueue(vhost, stand_in.name, durable=True, arguments=dict(stand_in.arguments))
        queue.committed = 0
        with groups.defs._apply():
            take_place(vhost, stand_in, queue)
    finally:
        groups.promoting = False
    for consumer, resume in consumers:  # from the offset after the last one given
        consumer.queue = queue
        try:
            if resume:
                consumer.arguments = dict(resume)
            queue.add_consumer(consumer)
        except (AttributeError, BrokerError):
            consumer.session.consumer_gone(consumer)
    queue.dispatch()
    vhost.streams.moved(vhost.name, queue.name)  # publishers here ask Metadata again
    return queue
