"""``roost perf``'s PerfTest flags and output format, without a broker."""

from __future__ import annotations

import argparse

import pytest

from roost.perf import report
from roost.perf.cli import add_arguments
from roost.perf.options import Options


def parse(*argv: str) -> Options:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return Options.from_args(parser.parse_args(list(argv)))


def test_perftest_short_flags_mean_what_they_mean_in_perftest() -> None:
    opts = parse("-x", "2", "-y", "3", "-s", "100", "-f", "persistent", "-f", "mandatory",
                 "-q", "5", "-c", "10", "-u", "q", "-r", "50", "-z", "3", "-C", "7", "-D", "8",
                 "-a", "-e", "x", "-k", "rk", "-t", "topic", "-A", "2", "-p", "-d", "t-1",
                 "-i", "0.5")
    assert (opts.producers, opts.consumers, opts.size) == (2, 3, 100)
    assert opts.persistent and opts.mandatory and opts.auto_ack and opts.predeclared
    assert (opts.prefetch, opts.confirm, opts.rate, opts.duration) == (5, 10, 50.0, 3.0)
    assert (opts.queue, opts.queues, opts.pmessages, opts.cmessages) == ("q", ("q",), 7, 8)
    assert (opts.exchange, opts.routing_key, opts.exchange_type) == ("x", "rk", "topic")
    assert (opts.multi_ack_every, opts.test_id, opts.interval) == (2, "t-1", 0.5)


def test_the_long_names_are_the_same_options() -> None:
    short = parse("-x", "2", "-y", "3", "-s", "100", "-q", "5", "-c", "10", "-u", "q", "-r",
                  "50", "-z", "3", "-a", "-A", "1")
    long = parse("--producers", "2", "--consumers", "3", "--size", "100", "--prefetch", "5",
                 "--confirm", "10", "--queue", "q", "--rate", "50", "--duration", "3",
                 "--auto-ack", "--multi-ack-every", "1", "--id", short.test_id)
    assert short == long
    assert parse("--qos", "5", "--time", "3", "--autoack").prefetch == 5


def test_how_long_a_run_lasts() -> None:
    assert parse().duration == 10.0
    assert parse("-C", "100").duration is None  # until the counts are reached
    assert parse("-D", "100").duration is None
    assert parse("-C", "100", "-z", "5").duration == 5.0


def test_queue_pattern() -> None:
    opts = parse("--queue-pattern", "perf-%03d", "--queue-pattern-from", "9",
                 "--queue-pattern-to", "11", "-x", "5")
    assert opts.queues == ("perf-009", "perf-010", "perf-011")
    assert [opts.queue_of(i) for i in range(5)] == [
        "perf-009", "perf-010", "perf-011", "perf-009", "perf-010"]
    assert opts.routing_key_for("perf-010") == "perf-010"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-k", "rk"], "needs -e"),
        (["-e", "x", "-k", "rk", "--queue-pattern", "q%d", "--queue-pattern-to", "2"],
         "do not mix"),
        (["-f", "persistant"], "unknown --flag persistant"),
        (["--queue-pattern", "q"], "wants one %d"),
        (["--queue-pattern", "q%d", "--queue-pattern-from", "5", "--queue-pattern-to", "2"],
         "must not be below"),
        (["--protocol", "mqtt", "-e", "x"], "publishes to amq.topic"),
        (["--protocol", "mqtt", "-q", "10"], "need --consumer-protocol amqp"),
        (["--protocol", "stomp", "--consumer-protocol", "mqtt"], "amqp or the same"),
        (["-vr", "100"], "--variable-rate wants VALUE:SECONDS"),
        (["-vr", "100:0"], "--variable-rate wants VALUE:SECONDS"),
        (["-vs", "big:1"], "--variable-size wants VALUE:SECONDS"),
        (["-vs", "10.5:1"], "whole number of bytes"),
        (["-L", "-1"], "must be >= 0"),
        (["--protocol", "stomp", "--priorities", "3"], "AMQP-only"),
        (["-C", "-1"], "--pmessages must be >= 0"),
        (["-i", "0"], "--interval"),
    ],
)
def test_invalid(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(*argv)


def test_progress_line_as_perftest_prints_it() -> None:
    line = report.progress_line("test-104559-972", 1.0, sent=25353.7, received=21470.2,
                                latency=(1125, 53420, 81622, 105021, 109837))
    assert line == (
        "id: test-104559-972, time: 1.000s, sent: 25353 msg/s, received: 21470 msg/s, "
        "min/median/75th/95th/99th consumer latency: 1125/53420/81622/105021/109837 µs")
    with_confirms = report.progress_line("t", 2.5, sent=10, received=None, confirmed=9.5,
                                         nacked=0.5)
    assert with_confirms == ("id: t, time: 2.500s, sent: 10 msg/s, confirmed: 9.5 msg/s, "
                             "nacked: 0.50 msg/s")
    assert report.progress_line("t", 1, sent=None, received=0).endswith(
        "received: 0 msg/s, min/median/75th/95th/99th consumer latency: 0/0/0/0/0 µs")


def test_summary_lines() -> None:
    lines = report.summary_lines("t", {
        "publish_rate": 26466.4, "consume_rate": 26458.0, "consumers": 1,
        "latency_us": {"min": 1, "p50": 2, "p75": 3, "p95": 4, "p99": 5, "max": 6}})
    assert lines == ["id: t, sending rate avg: 26466 msg/s",
                     "id: t, receiving rate avg: 26458 msg/s",
                     "id: t, consumer latency min/median/75th/95th/99th 1/2/3/4/5 µs"]
