"""The link's asyncio transport on loopback: the node whose name sorts first dials, frames
flow both ways, a turn's frames go out in one write, a cut connection is re-dialed, a
restarted peer (new incarnation) is a link down then up, a silent peer is dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from roost.cluster.applied import Applied
from roost.cluster.link import frames as f
from roost.cluster.link.transport import Link, LinkManager, Peer
from tests.support import free_port, until


class Node:
    def __init__(self, name: str, **kw: Any) -> None:
        self.got: list[tuple[str, f.Frame]] = []
        self.events: list[tuple[str, str]] = []
        self.links = LinkManager(
            name,
            on_frame=lambda link, frame: self.got.append((link.peer, frame)),
            on_up=lambda link: self.events.append(("up", link.peer)),
            on_down=lambda link, why: self.events.append(("down", link.peer)),
            **kw,
        )

    async def start(self) -> Peer:
        port = await self.links.listen("127.0.0.1", 0)
        return Peer(self.links.node, "127.0.0.1", port)


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())


def test_frames_both_ways_batched_in_one_write() -> None:
    async def main() -> None:
        a, b = Node("a"), Node("b")
        pa, pb = await a.start(), await b.start()
        a.links.set_peers([pa, pb])
        b.links.set_peers([pa, pb])  # b never dials a: a's name sorts first
        await until(lambda: a.links.link("b") is not None and b.links.link("a") is not None)
        assert a.events == [("up", "b")] and b.events == [("up", "a")]
        ab = a.links.link("b")
        assert ab is not None
        writes = ab.writes
        for i in range(1000):
            assert ab.send(f.Credit(i, 1))
        await until(lambda: len(b.got) == 1000)
        assert [fr for _p, fr in b.got] == [f.Credit(i, 1) for i in range(1000)]
        assert ab.writes == writes + 1
        ba = b.links.link("a")
        assert ba is not None and ba.send(f.Applied(5))
        await until(lambda: a.got == [("b", f.Applied(5))])
        assert len(b.links._dialing) == 0 and len(a.links.links) == 1
        await a.links.close()
        await b.links.close()

    run(main)


def test_cut_connection_is_redialed() -> None:
    async def main() -> None:
        a, b = Node("a"), Node("b")
        pa, pb = await a.start(), await b.start()
        a.links.set_peers([pa, pb])
        b.links.set_peers([pa, pb])
        await until(lambda: b.links.link("a") is not None)
        ba = b.links.link("a")
        assert ba is not None and ba.protocol is not None and ba.protocol.transport is not None
        ba.protocol.transport.abort()  # as a reset connection
        await until(lambda: ("down", "b") in a.events)
        await until(lambda: a.links.link("b") is not None and b.links.link("a") is not None)
        assert a.events == [("up", "b"), ("down", "b"), ("up", "b")]
        link = a.links.link("b")
        assert link is not None and link.send(f.ConsumeOk(1))
        await until(lambda: b.got == [("a", f.ConsumeOk(1))])
        await a.links.close()
        await b.links.close()

    run(main)


def test_restarted_peer_is_down_then_up() -> None:
    """b restarts on the same port with a new incarnation: a's old link goes down (its
    consumers and publishes must be dropped) and a new one comes up."""

    async def main() -> None:
        a, b = Node("a"), Node("b")
        pa, pb = await a.start(), await b.start()
        a.links.set_peers([pa, pb])
        await until(lambda: a.links.link("b") is not None)
        old: Link | None = a.links.link("b")
        await b.links.close()
        b2 = Node("b")
        await b2.links.listen("127.0.0.1", pb.port)
        await until(lambda: a.links.link("b") is not None and a.links.link("b") is not old)
        new = a.links.link("b")
        assert old is not None and new is not None and new.incarnation != old.incarnation
        assert a.events == [("up", "b"), ("down", "b"), ("up", "b")]
        await a.links.close()
        await b2.links.close()

    run(main)


def test_a_peer_registered_again_keeps_its_link() -> None:
    """b's record goes and comes back unchanged (its etcd lease expired during a pause and
    it registered again): a keeps the live link. It dialed a second connection, and every
    replaced connection dialed again, so the link went down and up every 50 ms for good."""

    async def main() -> None:
        a, b = Node("a"), Node("b")
        pa, pb = await a.start(), await b.start()
        a.links.set_peers([pa, pb])
        await until(lambda: a.links.link("b") is not None and b.links.link("a") is not None)
        a.links.set_peers([pa])  # b's lease expired
        a.links.set_peers([pa, pb])  # b registered again
        await asyncio.sleep(0.5)
        assert a.events == [("up", "b")] and b.events == [("up", "a")], (a.events, b.events)
        await a.links.close()
        await b.links.close()

    run(main)


def test_a_replaced_connection_does_not_dial_again() -> None:
    """A second connection to a peer replaces the first once; the first, closed, does not
    dial again (which replaced the second, which dialed again, ...)."""

    async def main() -> None:
        a, b = Node("a"), Node("b")
        pa, pb = await a.start(), await b.start()
        a.links.set_peers([pa, pb])
        await until(lambda: a.links.link("b") is not None and b.links.link("a") is not None)
        a.links._dial(pb, delay=0.0)  # as a peer's changed record does
        await until(lambda: len(a.events) == 3)
        await asyncio.sleep(0.5)
        assert a.events == [("up", "b"), ("down", "b"), ("up", "b")], a.events
        assert a.links.link("b") is not None and b.links.link("a") is not None
        await a.links.close()
        await b.links.close()

    run(main)


def test_silent_peer_is_dropped() -> None:
    async def main() -> None:
        a, b = Node("a", dead_after=1.5), Node("b")
        pa, pb = await a.start(), await b.start()
        a.links.set_peers([pa, pb])
        await until(lambda: b.links.link("a") is not None)
        ba = b.links.link("a")
        assert ba is not None and ba.protocol is not None
        ba.protocol._timer.cancel()  # type: ignore[union-attr]  # b stops heartbeating
        await until(lambda: ("down", "b") in a.events, timeout=5)
        await a.links.close()
        await b.links.close()

    run(main)


def test_malformed_input_drops_the_connection_only() -> None:
    async def main() -> None:
        a = Node("a")
        pa = await a.start()
        reader, writer = await asyncio.open_connection(pa.host, pa.port)
        writer.write(b"\x00\x00\x00\x02\x63\x00")  # kind 99
        await writer.drain()
        sent = await asyncio.wait_for(reader.read(), 5)  # until a closes the connection
        assert sent.startswith(b"\x00\x00\x00") and sent[4] == f.Kind.HELLO  # its Hello only
        assert a.events == [] and a.got == []
        writer.close()
        await a.links.close()

    run(main)


def test_publishes_go_as_one_batch_to_a_new_peer_and_one_by_one_to_an_old_one() -> None:
    """A peer whose Hello says version 2 reads Batch frames; one that says 1 (an older
    build) is sent the same frames one by one."""

    async def main() -> None:
        from roost.cluster.link.codec import encode, frames_of

        a = Node("a")
        pa = await a.start()
        pub = f.Publish(1, 0, "/", ["q"], "", "q", b"", b"body")
        for version, batched in ((2, True), (1, False)):
            reader, writer = await asyncio.open_connection(pa.host, pa.port)
            writer.write(encode(f.Hello(f"old{version}", version, version)))
            await writer.drain()
            await until(lambda v=version: a.links.link(f"old{v}") is not None)  # type: ignore[misc]
            link = a.links.link(f"old{version}")
            assert link is not None
            for _ in range(3):
                link.send(pub)
            got: list[f.Frame] = []
            data = b""
            while len([fr for fr in got if not isinstance(fr, f.Hello)]) < (1 if batched else 3):
                data += await asyncio.wait_for(reader.read(65536), 5)
                try:
                    got = frames_of(data)
                except Exception:  # a partial frame: read on
                    continue
            frames = [fr for fr in got if not isinstance(fr, f.Hello)]
            assert frames == ([f.Batch([pub, pub, pub])] if batched else [pub, pub, pub])
            writer.close()
        await a.links.close()

    run(main)


def test_a_change_waits_for_a_running_peer_whose_link_is_down() -> None:
    """A definition change's reply waits for every running peer to apply it, one whose
    link is down at the moment too (reconnecting): it went out at once, before that peer
    knew a queue declared, so a publish through it right after was unroutable."""

    async def main() -> None:
        a = Node("a")
        pa = await a.start()
        a.links.set_peers([pa, Peer("b", "127.0.0.1", free_port())])  # b: not reachable yet
        applied = Applied(a.links)
        waiting = asyncio.get_running_loop().create_task(applied.everywhere(5))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        applied.applied_by("b", 5)  # b's Applied frame once its link is up
        await asyncio.wait_for(waiting, 1.0)
        # a node that goes down (its lease ended) is not waited for past that
        waiting = asyncio.get_running_loop().create_task(applied.everywhere(6))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        a.links.set_peers([pa])
        applied.wake()  # membership changed
        await asyncio.wait_for(waiting, 0.5)
        await a.links.close()

    run(main)
