"""The server's occasional full collection (server_process.FullCollections): with the
collector's thresholds raised (tune_gc) a reference cycle is otherwise never freed; the
timer's collection frees it. The collector's own callbacks say when a full collection
has run, so the test awaits that rather than a time."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from roost.server_process import FullCollections


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: refcounting alone never frees it


def _live() -> int:
    return sum(1 for obj in gc.get_objects() if type(obj) is _Node)


def test_a_reference_cycle_is_freed_by_the_next_full_collection() -> None:
    async def main() -> None:
        full = asyncio.Event()

        def seen(phase: str, info: dict[str, Any]) -> None:
            if phase == "stop" and info["generation"] == 2:
                full.set()

        _Node()
        assert _live() == 1
        gc.callbacks.append(seen)
        collections = FullCollections(asyncio.get_running_loop(), 0.01)
        try:
            await asyncio.wait_for(full.wait(), 30)
        finally:
            collections.stop()
            gc.callbacks.remove(seen)
        assert _live() == 0

    gc.collect()
    gc.disable()  # only the timer's collection runs
    try:
        asyncio.run(main())
    finally:
        gc.enable()
