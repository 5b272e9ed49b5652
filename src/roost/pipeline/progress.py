"""Progress of a batch job on stderr: numbered steps, and Spark's own task counts.

``Progress.step`` prints ``[label] step 2/6: what``; ``Progress.done`` adds what the step
found and how long it took. While a step runs, a thread polls Spark's status tracker
once a second and prints each active stage's completed tasks (``stage 7: 3/8 tasks,
37%``) whenever that changes, so a long step is never silent.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

POLL_SECONDS = 1.0


class Progress:
    def __init__(self, spark: Any, label: str, steps: int, out: TextIO | None = None) -> None:
        self.label = label
        self.steps = steps
        self.out = out if out is not None else sys.stderr
        self.tracker = spark.sparkContext.statusTracker()
        self.current = 0
        self.started = time.monotonic()
        self._step_started = self.started
        self._seen: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # the poller and ``done`` both report stages

    def say(self, text: str) -> None:
        print(f"[{self.label}] {text}", file=self.out, flush=True)

    def step(self, text: str) -> None:
        self.current += 1
        self._step_started = time.monotonic()
        self.say(f"step {self.current}/{self.steps}: {text}")

    def done(self, text: str) -> None:
        took = time.monotonic() - self._step_started
        if self._thread is not None:
            self.report_stages()  # the step's last stages, before its summary line
        self.say(f"  {text} ({took:.1f} s)")

    def finish(self, text: str) -> None:
        self.say(f"{text} in {time.monotonic() - self.started:.1f} s")

    # -- Spark's task counts, polled in the background ------------------------------------

    def __enter__(self) -> Progress:
        self._thread = threading.Thread(target=self._poll, name="progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.report_stages()
            except Exception:  # the JVM is going away (job ending): stop quietly
                return

    def report_stages(self) -> None:
        with self._lock:
            self._report_stages()

    def _report_stages(self) -> None:
        active = set(self.tracker.getActiveStageIds())
        for stage_id in sorted(active):
            info = self.tracker.getStageInfo(stage_id)
            if info is None or not info.numTasks:
                continue
            state = (info.numCompletedTasks, info.numTasks)
            if self._seen.get(stage_id) == state:
                continue
            self._seen[stage_id] = state
            done, total = state
            self.say(f"  spark stage {stage_id}: {done}/{total} tasks, {100 * done // total}%")
        for stage_id in sorted(set(self._seen) - active):  # seen running, now over
            total = self._seen.pop(stage_id)[1]
            self.say(f"  spark stage {stage_id}: {total}/{total} tasks, finished")
