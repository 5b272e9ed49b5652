"""Several nodes of a cluster behind one data source: option ``url`` may list AMQP URLs
separated by commas (``amqp://u:p@n1:5672/%2F,amqp://u:p@n2:5672/%2F``), as a Kafka
source lists its bootstrap servers. Every node of a Roost cluster serves every queue
(a replicated stream is read through its leader from any node), so any node will do.

``Nodes`` is the list and where the caller is in it: a connection goes to the current
node; when it is lost, or the node refuses in a way another node or a moment later may
not (not running, the stream between two leaders, a second relayed consumer), the
caller moves on to the next node (``Nodes.failed``), waiting a little more each time it
has been round the whole list (0.2 s doubling to 2 s), until ``failoverTimeout``
seconds (default 60) pass without a success. The next call in the same process starts
at the node that served last. With one URL nothing is retried: the error surfaces as
it always did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from roost.client import Closed, ConnectionLost
from roost.pipeline.amqp import Client, RoostError, Unreachable, node_down, node_urls

T = TypeVar("T")

FIRST_PAUSE = 0.2
LONGEST_PAUSE = 2.0
DEFAULT_TIMEOUT = 60.0

# broker refusals that another node, or the same one a moment later, may not make:
# 320 a node shutting down, 541 an internal error (a cluster write that failed), 506
# out of resources; and two by their text: 404 for a queue whose leader's node is down
# (a replicated stream between two leaders), 406 for a second relayed stream consumer
# on a node that does not lead (older nodes relayed one per node; now any number)
_ELSEWHERE = {320, 506, 541}


# per node list, the node that last served a call in this process (the driver, or a
# reused Python worker): the next call starts there, not at a node known to be down
_last_served: dict[str, int] = {}


def retryable(exc: BaseException) -> bool:
    """Whether another node may succeed where this attempt failed."""
    if isinstance(exc, (Unreachable, ConnectionLost, OSError)):
        return True
    code = exc.reply_code if isinstance(exc, Closed) else getattr(exc, "code", 0)
    if not isinstance(exc, (Closed, RoostError)):
        return False
    if code == 406:  # only the refusal of a second relayed consumer (stream_standin.py)
        return "leader's node" in str(exc)
    if code == 404:  # only a queue whose node is down (a stream between two leaders)
        return node_down(exc)
    return code in _ELSEWHERE


class Nodes:
    """The data source's nodes and the one in use; see the module docstring."""

    def __init__(self, option: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.option = option
        self.urls = node_urls(option)
        self.timeout = timeout
        self.at = _last_served.get(option, 0)
        self._tries = 0
        self._since = 0.0  # when the current run of failures began

    @property
    def url(self) -> str:
        return self.urls[self.at]

    @property
    def several(self) -> bool:
        return len(self.urls) > 1

    def client(self) -> Client:
        return Client(self.url)

    def failed(self, exc: BaseException) -> None:
        """Move on to the next node after ``exc`` (waiting once round the list), or
        re-raise it: one URL, an error no other node would avoid, or out of time."""
        if not self.several or not retryable(exc):
            raise exc
        now = time.monotonic()
        if not self._tries:
            self._since = now
        elif now - self._since > self.timeout:
            raise RoostError(
                f"no node of {len(self.urls)} served the request for {self.timeout:g} s"
                f" (failoverTimeout); last: {exc}"
            ) from exc
        self._tries += 1
        self.at = (self.at + 1) % len(self.urls)
        if self._tries % len(self.urls) == 0:  # round the list: give the cluster a moment
            rounds = self._tries // len(self.urls)
            time.sleep(min(LONGEST_PAUSE, FIRST_PAUSE * 2 ** (rounds - 1)))

    def succeeded(self) -> None:
        self._tries = 0
        if self.several:
            _last_served[self.option] = self.at

    def run(self, action: Callable[[Client], T]) -> T:
        """``action`` on a connection to a node, moved to the next node until it succeeds."""
        while True:
            try:
                with self.client() as client:
                    result = action(client)
            except Exception as exc:  # failed() re-raises what no other node would fix
                self.failed(exc)
                continue
            self.succeeded()
            return result
