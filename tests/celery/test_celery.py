"""Celery against Roost, with a real worker: what LavinMQ's issue 2201 and RabbitMQ's
consumer timeout broke for Celery users, checked end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from tests.celery.app import add, app, counted, flaky, hold, record, sleep_for, stamp
from tests.celery.conftest import CONSUMER_TIMEOUT_MS, ROOT, Worker, WorkerFactory
from tests.support import RoostProcess

LONG_TASK_S = CONSUMER_TIMEOUT_MS / 1000 + 1.5
TIMED_OUT = "delivery acknowledgement on channel"


def _wait_for(path: Path, lines: int, timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(got := path.read_text().splitlines()) >= lines:
            return got
        time.sleep(0.05)  # a file written by another process: nothing to await
    raise TimeoutError(f"{path} has fewer than {lines} lines")


def test_round_trip_with_the_rpc_result_backend(worker: Worker) -> None:
    results = [add.delay(i, i) for i in range(20)]
    assert [r.get(timeout=20) for r in results] == [2 * i for i in range(20)]
    assert add.apply_async((2, 3), countdown=0).get(timeout=20) == 5


def test_retry_with_countdown(worker: Worker) -> None:
    started = time.monotonic()
    assert flaky.delay("retry").get(timeout=30) == 2  # failed once, retried, succeeded
    assert time.monotonic() - started >= 1.0  # the retry's countdown was honoured


def test_eta(worker: Worker) -> None:
    eta = datetime.now(UTC) + timedelta(seconds=2)
    ran_at = stamp.apply_async(eta=eta).get(timeout=30)
    assert ran_at >= eta.timestamp() - 0.05


def test_inspect_and_control(worker: Worker) -> None:
    """Remote control goes through pidbox fanout exchanges and reply queues."""
    inspect = app.control.inspect(destination=[worker.name], timeout=5)
    registered = inspect.registered()
    assert registered is not None and "tests.celery.app.add" in registered[worker.name]
    assert inspect.active() == {worker.name: []}
    replies = app.control.rate_limit(
        "tests.celery.app.add", "100/m", destination=[worker.name], reply=True, timeout=5
    )
    assert replies and "ok" in replies[0][worker.name]


def test_a_killed_workers_unacked_task_is_redelivered(
    workers: WorkerFactory, scratch: Path
) -> None:
    """acks_late: the task runs again on the next worker, flagged redelivered."""
    first = workers("crash-1", "crash")
    result = hold.apply_async(("crash",), queue="crash")
    assert _wait_for(scratch / "hold-crash", 1) == ["first"]
    first.kill()  # mid-task: the delivery was never acknowledged
    workers("crash-2", "crash", ready=False)  # busy with the redelivered task at once
    assert _wait_for(scratch / "hold-crash", 2) == ["first", "redelivered"]
    (scratch / "release-crash").touch()
    assert result.get(timeout=30) is True


def test_priority_tasks_run_highest_first(workers: WorkerFactory, scratch: Path) -> None:
    """Queued while no worker runs; a worker fetching one at a time takes the highest."""
    low = [record.apply_async(("prio", f"low-{i}"), queue="prio", priority=1) for i in range(4)]
    high = record.apply_async(("prio", "high"), queue="prio", priority=9)
    workers("prio", "prio")
    for r in [*low, high]:
        r.get(timeout=30)
    order = (scratch / "order-prio").read_text().split()
    assert order == ["high", "low-0", "low-1", "low-2", "low-3"]


def test_a_task_with_its_own_ack_deadline_outlives_the_consumer_timeout(
    broker: RoostProcess, worker: Worker
) -> None:
    """RabbitMQ closes the channel of a worker whose task outlives consumer_timeout; on
    Roost a message that declares its own ack deadline (``x-ack-timeout``) is exempt."""
    result = sleep_for.apply_async((LONG_TASK_S,), headers={"x-ack-timeout": 60})
    assert result.get(timeout=30) == LONG_TASK_S
    assert TIMED_OUT not in broker.log


def test_without_it_the_consumer_timeout_closes_the_workers_channel(
    broker: RoostProcess, workers: WorkerFactory, scratch: Path
) -> None:
    """As in RabbitMQ: 406 on the worker's channel, and the message is requeued. Celery
    5.7's worker takes the 406 as an unrecoverable error and exits (the first run's
    result still arrives: results travel on another connection); the next worker runs
    the task again, flagged redelivered. Its own workers and queue: the task would
    outlive the timeout again on every run."""
    timeouts = broker.log.count(TIMED_OUT)
    first = workers("long-1", "long")
    second = None
    try:
        result = counted.apply_async(("long", LONG_TASK_S), queue="long")
        assert result.get(timeout=60) > 0
        first.proc.wait(timeout=60)
        assert "Unrecoverable error: PreconditionFailed" in first.log.read_text()
        assert broker.log.count(TIMED_OUT) > timeouts
        second = workers("long-2", "long", ready=False)  # busy with the task at once
        runs = _wait_for(scratch / "runs-long", 2, timeout=60)
        assert [line.split()[0] for line in runs] == ["first", "redelivered"]
    finally:
        for worker in (first, second):
            if worker is not None:
                worker.kill()
        httpx.delete(f"{broker.http_url}/api/queues/%2F/long/contents", auth=("guest", "guest"))


def test_an_eta_past_the_consumer_timeout_runs_once_with_the_queue_recipe(
    broker: RoostProcess, workers: WorkerFactory, scratch: Path
) -> None:
    """The classic Celery-on-RabbitMQ failure: a worker holds an eta (or countdown) task
    unacknowledged until it is due, past consumer_timeout, and loses its channel. With
    the recipe of docs/celery.md (the queue's ``consumer_arguments``: an ``x-ack-timeout``
    above the longest eta) the task runs once, when due, and no channel is closed."""
    timeouts = broker.log.count(TIMED_OUT)
    workers("eta", "eta")
    eta = datetime.now(UTC) + timedelta(seconds=LONG_TASK_S)
    ran_at = counted.apply_async(("eta",), eta=eta, queue="eta").get(timeout=60)
    assert ran_at >= eta.timestamp() - 0.05
    runs = (scratch / "runs-eta").read_text().splitlines()
    assert [line.split()[0] for line in runs] == ["first"]
    assert broker.log.count(TIMED_OUT) == timeouts


def test_celery_inspect_ping_from_the_command_line(broker: RoostProcess, worker: Worker) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "tests.celery.app", "inspect", "ping",
         "-d", worker.name, "--timeout", "10"],
        cwd=ROOT, env={**os.environ, "ROOST_TEST_BROKER": broker.url},
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{worker.name}: OK" in done.stdout and "pong" in done.stdout
