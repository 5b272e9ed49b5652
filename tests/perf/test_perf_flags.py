"""``roost perf`` against a real Roost: each PerfTest flag does what PerfTest's does, seen
from the broker's side (queues, bindings, consumers, message properties) wherever the
broker shows it, and from the report otherwise."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from tests.perf.perf_runs import PERF, api, perf
from tests.support import RoostProcess, drain, eventually, free_port

LINE = re.compile(
    r"^id: (?P<id>[\w-]+), time: \d+\.\d{3}s, sent: [\d.]+ msg/s, received: [\d.]+ msg/s, "
    r"min/median/75th/95th/99th consumer latency: \d+/\d+/\d+/\d+/\d+ µs$"
)


@pytest.fixture
def running(roost: RoostProcess) -> Iterator[Any]:
    """Start ``roost perf`` in the background (``start(*args)``); each is waited for."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([*PERF, "--url", roost.url, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, out + err


def witness(server: RoostProcess, exchange: str, key: str) -> str:
    """A queue of the test's own bound to ``exchange`` with ``key``: it gets a copy of
    everything perf publishes there."""
    name = f"witness-{uuid.uuid4().hex[:8]}"
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.exchange_declare(exchange, "direct")
        ch.queue_declare(name)
        ch.queue_bind(name, exchange, key)
    return name


@pytest.mark.parametrize(
    ("flags", "mode"), [([], 1), (["-f", "persistent"], 2), (["--persistent"], 2)]
)
def test_C_sends_exactly_that_many_and_f_persistent_marks_them(
    roost: RoostProcess, flags: list[str], mode: int
) -> None:
    exchange, queue = f"perf.x.{uuid.uuid4().hex[:6]}", f"perf.q.{uuid.uuid4().hex[:6]}"
    copy = witness(roost, exchange, queue)  # perf binds its queue with the queue's name
    report, _ = perf(roost, "-x", "2", "-y", "0", "-C", "500", "-s", "100", "-e", exchange,
                     "-u", queue, *flags)
    assert report["published"] == 1000  # -C is per producer, as PerfTest's
    got = drain(roost, copy, ack=True)
    assert len(got) == 1000
    assert {props.delivery_mode for _m, props, _b in got} == {mode}
    assert {len(body) for _m, _p, body in got} == {100}  # -s
    assert api(roost, f"/exchanges/%2F/{exchange}")["name"] == exchange  # not ours to delete
    assert queue not in {q["name"] for q in api(roost, "/queues")}  # ours: deleted


def test_header_puts_those_headers_on_every_message(roost: RoostProcess) -> None:
    exchange, queue = f"perf.h.{uuid.uuid4().hex[:6]}", f"perf.hq.{uuid.uuid4().hex[:6]}"
    copy = witness(roost, exchange, queue)
    perf(roost, "-x", "1", "-y", "0", "-C", "50", "-e", exchange, "-u", queue,
         "--header", "h0=value-0", "--header", "tenant=a=b")
    got = drain(roost, copy, ack=True)
    assert len(got) == 50
    assert all(props.headers == {"h0": "value-0", "tenant": "a=b"} for _m, props, _b in got)


def test_D_takes_exactly_that_many_and_leaves_the_rest(roost: RoostProcess) -> None:
    queue = f"perf.d.{uuid.uuid4().hex[:6]}"
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        conn.channel().queue_declare(queue)
    report, _ = perf(roost, "-p", "-u", queue, "-x", "1", "-y", "1", "-C", "1000", "-D", "300",
                     "-q", "50")
    assert (report["published"], report["consumed"]) == (1000, 300)
    assert api(roost, f"/queues/%2F/{queue}")["messages"] == 700  # -p: left as it is


@pytest.mark.parametrize(("flags", "ack_required"), [(["-a"], False), ([], True)])
def test_a_and_q_as_the_broker_sees_the_consumer(
    roost: RoostProcess, running: Any, flags: list[str], ack_required: bool
) -> None:
    queue = f"perf.a.{uuid.uuid4().hex[:6]}"
    running("-u", queue, "-x", "1", "-y", "1", "-z", "3", "-r", "50", "-q", "7", *flags)
    consumer = eventually(lambda: [c for c in api(roost, "/consumers")
                                   if c["queue"]["name"] == queue], 20, "no consumer")[0]
    assert (consumer["ack_required"], consumer["prefetch_count"]) == (ack_required, 7)


def test_c_confirms_every_publish(roost: RoostProcess) -> None:
    report, _ = perf(roost, "-x", "1", "-y", "0", "-C", "3000", "-c", "20")
    assert report["published"] == report["confirmed"] == 3000
    report, _ = perf(roost, "-x", "1", "-y", "0", "-C", "100")
    assert report["confirmed"] == 0  # no confirm.select: the broker sends no acks


def test_queue_pattern_declares_the_queues_and_spreads_the_workers(
    roost: RoostProcess, running: Any
) -> None:
    prefix = f"pp{uuid.uuid4().hex[:4]}"
    proc = running("--queue-pattern", f"{prefix}-%d", "--queue-pattern-from", "3",
                   "--queue-pattern-to", "6", "-x", "4", "-y", "8", "-z", "3", "-r", "20")
    names = [f"{prefix}-{i}" for i in range(3, 7)]

    def ours() -> dict[str, int]:
        return {q["name"]: q["consumers"] for q in api(roost, "/queues")
                if q["name"].startswith(prefix)}

    assert eventually(lambda: ours() == dict.fromkeys(names, 2), 20, ours)  # 8 over 4
    out, _err = proc.communicate(timeout=60)
    report = json.loads(out.splitlines()[-1])
    assert report["queues"] == 4 and report["consumed"] == report["published"] > 0
    assert ours() == {}  # deleted at the end


def test_e_t_k_make_the_exchange_and_the_binding(roost: RoostProcess, running: Any) -> None:
    exchange, queue = f"perf.t.{uuid.uuid4().hex[:6]}", f"perf.tq.{uuid.uuid4().hex[:6]}"
    running("-e", exchange, "-t", "topic", "-k", "orders.eu", "-u", queue, "-z", "3",
            "-r", "20")
    made = eventually(lambda: [x for x in api(roost, "/exchanges") if x["name"] == exchange],
                      20, "no exchange")[0]
    assert made["type"] == "topic"
    bindings = eventually(lambda: api(roost, f"/exchanges/%2F/{exchange}/bindings/source"),
                          20, "no binding")
    assert [(b["destination"], b["routing_key"]) for b in bindings] == [(queue, "orders.eu")]
    eventually(lambda: api(roost, f"/queues/%2F/{queue}")["message_stats"]["publish"] > 0,
               20, "nothing routed")


def test_progress_lines_and_summary_in_perftest_format(roost: RoostProcess) -> None:
    report, out = perf(roost, "-z", "2.5", "-r", "200", "--id", "test-123456-789")
    lines = out.splitlines()
    progress = [ln for ln in lines if LINE.match(ln)]
    # 1 s, 2 s and the end at 2.5 s (a loaded box may merge the last two)
    assert 2 <= len(progress) <= 3, out
    assert float(progress[-1].split("time: ")[1].split("s,")[0]) >= 2.5
    assert {LINE.match(ln)["id"] for ln in progress} == {"test-123456-789"}  # type: ignore[index]
    # one message in flight at the deadline may fall outside the window
    rates = [re.fullmatch(r"id: test-123456-789, (sending|receiving) rate avg: (\d+) msg/s", ln)
             for ln in lines]
    assert {m[1]: 195 <= int(m[2]) <= 201 for m in rates if m} == {
        "sending": True, "receiving": True}, out
    assert any(ln.startswith("id: test-123456-789, consumer latency min/median/75th/95th/99th ")
               and ln.endswith(" µs") for ln in lines)
    assert set(report["latency_us"]) == {"min", "p50", "p75", "p95", "p99", "max"}
    _, out = perf(roost, "-z", "1.2", "-r", "100", "-c", "10", "-i", "0.5")
    assert re.search(r"sent: \d+ msg/s, confirmed: \d+ msg/s, nacked: 0 msg/s, received", out)


def test_r_and_z_pace_and_bound_the_run(roost: RoostProcess) -> None:
    started = time.monotonic()
    report, _ = perf(roost, "-x", "2", "-y", "1", "-r", "100", "-z", "2")
    assert time.monotonic() - started >= 2
    assert report["duration_s"] == 2.0
    assert 380 <= report["published"] <= 404  # 2 producers x 100 msg/s x 2 s
    assert report["consumed"] == report["published"]


def test_H_spreads_workers_over_uris_and_skips_one_that_does_not_answer(
    roost: RoostProcess,
) -> None:
    dead = f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F"
    report, _ = perf(roost, "-H", f"{dead},{roost.url}", "-x", "2", "-y", "2", "-C", "100")
    assert (report["published"], report["consumed"]) == (200, 200)


def test_json_to_a_file(roost: RoostProcess, tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    done = subprocess.run([*PERF, "--url", roost.url, "-C", "50", "--json", str(target)],
                          capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(target.read_text())["published"] == 50
    assert not done.stdout.splitlines()[-1].startswith("{")


@pytest.mark.parametrize("protocol", ["stomp", "ws"])
def test_stomp_and_websocket_modes(roost: RoostProcess, protocol: str) -> None:
    """Producers SEND (persistent:true makes delivery mode 2, receipts make -c work),
    consumers SUBSCRIBE with acks; the same queue seen over AMQP."""
    url = (f"stomp://127.0.0.1:{roost.stomp_port}" if protocol == "stomp"
           else f"ws://127.0.0.1:{roost.ws_port}/ws")
    queue = f"perf.{protocol}.{uuid.uuid4().hex[:6]}"
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        conn.channel().queue_declare(queue)
    mode = ["--protocol", protocol, "--stomp-url", url, "-p", "-u", queue]
    report, _ = perf(roost, *mode, "-y", "0", "-C", "400", "-c", "50", "-f", "persistent")
    assert report["published"] == report["confirmed"] == 400
    got = drain(roost, queue)  # looked at, left in the queue
    assert len(got) == 400 and {p.delivery_mode for _m, p, _b in got} == {2}
    report, _ = perf(roost, *mode, "-x", "0", "-y", "1", "-D", "300", "-q", "20", "-A", "10")
    assert report["consumed"] == 300
    assert api(roost, f"/queues/%2F/{queue}")["messages"] == 100  # 300 acked, 100 left
    report, _ = perf(roost, *mode, "-x", "1", "-y", "1", "-z", "2", "-r", "300", "-a")
    assert report["consumed"] == report["published"] + 100  # the 100 left, and the new
    assert api(roost, f"/queues/%2F/{queue}")["messages"] == 0


def test_the_long_options_bench_scripts_use_still_work(roost: RoostProcess) -> None:
    queue = f"perf.old.{uuid.uuid4().hex[:6]}"
    report, _ = perf(roost, "--producers", "1", "--consumers", "2", "--size", "64",
                     "--duration", "1", "--prefetch", "10", "--confirm", "10",
                     "--multi-ack-every", "5", "--rate", "500", "--queue", queue,
                     "--durable-queue", "--queue-arg", "x-max-length=100000",
                     "--priorities", "3", "--json")
    assert report["mode"] == "throughput" and report["consumed"] == report["published"] > 0
    report, _ = perf(roost, "--queue-declares", "50", "--queue", queue)
    assert report["mode"] == "queue-declares" and report["declares"] == 50
    started = time.monotonic()
    report, _ = perf(roost, "--consumers", "0", "--duration", "1", "--auto-ack")
    assert time.monotonic() - started < 30 and report["consume_rate"] == 0
