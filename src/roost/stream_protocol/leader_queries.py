"""QueryOffset, QueryPublisherSequence, StreamStats and ResolveOffsetSpec on a cluster
node with no copy of a replicated stream: the core asks the stream's leader over the
node link (``ask_stream_leader``) and the reply waits for its answer, the session
reading nothing more meanwhile (as a durable change's reply waits). RabbitMQ answers
these on any node of the cluster; Roost answered PRECONDITION_FAILED there before.
The leader out of reach: STREAM_NOT_AVAILABLE, as RabbitMQ answers while no leader is
known. Each ``ask_*`` returns False when this node answers itself (a stream here, a
member's copy, or an error such as a missing stream or right), and the handler goes on as
before. Sans-IO: the port's call and the codec's frames only."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.stream_protocol import constants as c
from roost.stream_protocol.frames import (
    QueryOffset,
    QueryOffsetResponse,
    QueryPublisherSequence,
    QueryPublisherSequenceResponse,
    ResolveOffsetSpec,
    ResolveOffsetSpecResponse,
    StreamStats,
    StreamStatsResponse,
)

if TYPE_CHECKING:
    from roost.stream_protocol.commands_base import CommandsBase

Reply = Callable[[int, Any], None]  # (response code, the leader's value)


def _from_leader(cmds: CommandsBase, stream: str, question: dict[str, Any], reply: Reply) -> bool:
    box: list[Any] = []
    finish: Callable[[BaseException | None], None] | None = None

    def answered(answer: Any) -> None:  # never within ask_stream_leader (it says so)
        box.append(answer)
        if finish is not None:
            finish(None)

    if not cmds.port.ask_stream_leader(cmds.client, stream, question, answered):
        return False  # answered here, an error too, by the handler's own call
    finish = cmds.s.hold_until(lambda: _reply(box[0] if box else None, reply))
    return True


def _reply(answer: Any, reply: Reply) -> None:
    if isinstance(answer, dict) and "value" in answer:
        reply(c.OK, answer["value"])
    elif isinstance(answer, dict) and answer.get("code") == "not_found":
        reply(c.STREAM_DOES_NOT_EXIST, None)
    else:
        reply(c.STREAM_NOT_AVAILABLE, None)


def ask_offset(cmds: CommandsBase, f: QueryOffset) -> bool:
    def reply(code: int, value: Any) -> None:
        if code == c.OK and not isinstance(value, int):
            code = c.NO_OFFSET
        offset = value if isinstance(value, int) else 0
        cmds.s.send(QueryOffsetResponse(f.correlation_id, code, offset))

    return _from_leader(cmds, f.stream, {"what": "offset", "reference": f.reference}, reply)


def ask_sequence(cmds: CommandsBase, f: QueryPublisherSequence) -> bool:
    def reply(code: int, value: Any) -> None:
        last = value if isinstance(value, int) else 0
        cmds.s.send(QueryPublisherSequenceResponse(f.correlation_id, code, last))

    return _from_leader(cmds, f.stream, {"what": "sequence", "reference": f.reference}, reply)


def ask_stats(cmds: CommandsBase, f: StreamStats) -> bool:
    def reply(code: int, value: Any) -> None:
        stats = {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else {}
        cmds.s.send(StreamStatsResponse(f.correlation_id, code, stats))

    return _from_leader(cmds, f.stream, {"what": "stats"}, reply)


def ask_resolve(cmds: CommandsBase, f: ResolveOffsetSpec, kind: str) -> bool:
    spec = f.offset_spec

    def reply(code: int, value: Any) -> None:
        if code == c.OK and isinstance(value, int):
            cmds.s.send(ResolveOffsetSpecResponse(f.correlation_id, c.OK, c.OFFSET_OFFSET, value))
        else:
            code = c.INTERNAL_ERROR if code == c.OK else code
            cmds.s.send(ResolveOffsetSpecResponse(f.correlation_id, code, spec.type, 0))

    question = {"what": "resolve", "kind": kind, "value": spec.value}
    return _from_leader(cmds, f.stream, question, reply)
