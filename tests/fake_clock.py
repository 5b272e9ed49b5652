"""A clock for sans-IO session tests: time moves only when a test says so."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any


class FakeTimer:
    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    def cancelled(self) -> bool:
        return self._cancelled


class FakeClock:
    """Time moves only when a test says so; due callbacks run then, in order."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._due: list[tuple[float, int, FakeTimer, Callable[..., object], tuple[Any, ...]]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        timer = FakeTimer()
        heapq.heappush(self._due, (self.now + delay, next(self._order), timer, callback, args))
        return timer

    def call_soon(self, callback: Callable[..., object], *args: Any) -> FakeTimer:
        return self.call_later(0.0, callback, *args)

    def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while self._due and self._due[0][0] <= end:
            when, _, timer, callback, args = heapq.heappop(self._due)
            self.now = when
            if not timer.cancelled():
                callback(*args)
        self.now = end

    def turn(self) -> None:
        """One loop iteration: the callbacks due now, not those they schedule."""
        due = []
        while self._due and self._due[0][0] <= self.now:
            due.append(heapq.heappop(self._due))
        for _when, _, timer, callback, args in due:
            if not timer.cancelled():
                callback(*args)
