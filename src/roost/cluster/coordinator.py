"""The cluster's coordinator: etcd v3, reached through aetcd (asyncio over gRPC).

etcd holds what every node must agree on (who is up, the definitions, later the leaders of
replicated queues); this module is the only one that talks to it. It offers what the rest
of ``roost.cluster`` needs and nothing more:

- ``txn``: a compare-and-swap on keys' revisions, in etcd's one transaction;
- ``get_prefix`` and ``watch``: a consistent snapshot at a revision, then every change
  after it, batched by revision and resumed after a lost connection from the next one;
- ``grant_lease`` and ``refresh_lease``: ``lease.py``'s ``LeaseKeeper`` keeps a node's
  lease alive, with a callback when etcd says it is gone (a registration hangs on it).

Every failure to reach etcd raises ``CoordinatorUnavailable`` with the endpoints tried.
Reads and watches move on to the next endpoint of ``--cluster``; a write is never resent
by itself, because a write whose answer was lost may have committed: the caller decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import aetcd
import aetcd.exceptions
import aetcd.rpc

from roost.cluster.errors import ClusterError, CoordinatorUnavailable

log = logging.getLogger("roost.cluster.etcd")

Target = Literal["mod", "create", "version", "value"]


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    mod_revision: int
    create_revision: int = 0
    lease: int = 0


@dataclass(frozen=True, slots=True)
class Compare:
    """``key``'s ``target`` compared with ``value`` (``==``, ``!=``, ``<``, ``>``).

    ``Compare(k, "create", 0)`` holds while ``k`` does not exist; ``Compare(k, "mod", r)``
    while nobody changed ``k`` since revision ``r``: the compare-and-swap of a declare."""

    key: str
    target: Target
    value: int | bytes
    op: Literal["==", "!=", "<", ">"] = "=="


@dataclass(frozen=True, slots=True)
class Put:
    key: str
    value: bytes
    lease: int = 0


@dataclass(frozen=True, slots=True)
class Delete:
    key: str
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Get:
    key: str
    prefix: bool = False


Op = Put | Delete | Get


@dataclass(slots=True)
class TxnResult:
    succeeded: bool
    revision: int
    # one list per Get of the branch that ran, in order
    reads: list[list[KeyValue]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Change:
    """One key's change in a watched revision: ``value`` is None for a deletion."""

    key: str
    value: bytes | None
    revision: int


def prefix_end(prefix: str) -> bytes:
    """The end of etcd's range of every key starting with ``prefix``."""
    raw = bytearray(prefix.encode())
    while raw:
        if raw[-1] < 0xFF:
            raw[-1] += 1
            return bytes(raw)
        raw.pop()
    return b"\0"


def _kv(raw: Any) -> KeyValue:
    return KeyValue(
        raw.key.decode(), bytes(raw.value), raw.mod_revision, raw.create_revision, raw.lease
    )


class Coordinator:
    """One connection to etcd (one gRPC channel at a time, over the endpoints in turn)."""

    def __init__(self, endpoints: Sequence[tuple[str, int]], *, timeout: float = 3.0) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self._current = 0
        self._client: aetcd.Client | None = None
        self._closed = False
        self._retired: set[asyncio.Task[None]] = set()

    @property
    def where(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.endpoints)

    def _unavailable(self, exc: BaseException) -> CoordinatorUnavailable:
        return CoordinatorUnavailable(f"etcd unreachable at {self.where} ({_reason(exc)})")

    async def _connected(self) -> aetcd.Client:
        if self._closed:
            raise CoordinatorUnavailable("the coordinator connection is closed")
        if self._client is None:
            host, port = self.endpoints[self._current]
            # aetcd's timeout is a whole number of seconds for every call
            self._client = aetcd.Client(host, port, timeout=max(1, round(self.timeout)))
            await self._client.connect()
        return self._client

    def _failed(self, client: aetcd.Client | None) -> None:
        """``client``'s endpoint failed. With one endpoint the channel stays: gRPC
        reconnects it by itself. With several, later calls go to the next endpoint, and
        the old channel is closed once the calls still on it are done."""
        if len(self.endpoints) == 1 or client is None or client is not self._client:
            return
        self._client = None
        self._current = (self._current + 1) % len(self.endpoints)
        self._retired.add(
            asyncio.get_running_loop().create_task(_close_later(client, 2 * self.timeout))
        )

    async def _call(self, what: Callable[[aetcd.Client], Any], *, retry: bool) -> Any:
        """Run ``what`` on the channel; reads (``retry``) try each endpoint once."""
        attempts = len(self.endpoints) if retry else 1
        for attempt in range(attempts):
            client = None
            try:
                client = await self._connected()
                return await what(client)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # our caller was cancelled, not the call
                exc: BaseException = ConnectionError("the call was cut off")
            except Exception as failure:
                if not _unreachable(failure):
                    raise ClusterError(f"etcd refused the request: {_reason(failure)}") from None
                exc = failure
            self._failed(client)
            if attempt == attempts - 1:
                raise self._unavailable(exc) from None
        raise AssertionError("unreachable")

    async def close(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        for task in self._retired:
            task.cancel()
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    # -- reads

    async def get(self, key: str) -> KeyValue | None:
        got = await self._call(lambda c: c.get(key.encode()), retry=True)
        return None if got is None else _kv(got)

    async def get_prefix(self, prefix: str) -> tuple[list[KeyValue], int]:
        """Every key under ``prefix`` and the revision of that snapshot (watch from the
        next one to miss nothing)."""

        async def read(c: aetcd.Client) -> Any:
            request = c._build_get_range_request(prefix.encode(), prefix_end(prefix))
            return await c.kvstub.Range(request, timeout=self.timeout, metadata=c.metadata)

        response = await self._call(read, retry=True)
        return [_kv(kv) for kv in response.kvs], int(response.header.revision)

    # -- writes

    async def put(self, key: str, value: bytes, *, lease: int = 0) -> int:
        got = await self._call(
            lambda c: c.put(key.encode(), value, lease=lease or None), retry=False
        )
        return int(got.header.revision)

    async def delete(self, key: str, *, prefix: bool = False) -> int:
        result = await self.txn([], [Delete(key, prefix)])
        return result.revision

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult:
        """All of ``compare`` hold: ``success`` runs, else ``failure``; atomically."""

        async def run(c: aetcd.Client) -> Any:
            request = aetcd.rpc.TxnRequest(
                compare=[_compare(x) for x in compare],
                success=c._ops_to_requests([_op(op) for op in success]),
                failure=c._ops_to_requests([_op(op) for op in failure]),
            )
            return await c.kvstub.Txn(request, timeout=self.timeout, metadata=c.metadata)

        response = await self._call(run, retry=False)
        reads = [
            [_kv(kv) for kv in r.response_range.kvs]
            for r in response.responses
            if r.WhichOneof("response") == "response_range"
        ]
        return TxnResult(bool(response.succeeded), int(response.header.revision), reads)

    # -- leases

    async def grant_lease(self, ttl: int) -> int:
        lease = await self._call(lambda c: c.lease(ttl), retry=False)
        return int(lease.id)

    async def refresh_lease(self, lease_id: int) -> int:
        """The lease's remaining TTL after a keepalive; 0 when etcd no longer has it."""
        reply = await self._call(lambda c: c.refresh_lease(lease_id), retry=True)
        return 0 if reply is None else int(reply.TTL)

    async def revoke_lease(self, lease_id: int) -> None:
        with contextlib.suppress(ClusterError):
            await self._call(lambda c: c.revoke_lease(lease_id), retry=False)

    # -- watches

    async def watch(self, prefix: str, from_revision: int) -> AsyncIterator[list[Change]]:
        """Every change under ``prefix`` from ``from_revision`` on, one list per revision,
        in order. A lost connection is resumed from the next revision, on any endpoint,
        until the watch is closed; while etcd cannot be reached, nothing is yielded (the
        caller's view simply stays at its revision). Raises ``ClusterError`` when etcd
        compacted the revisions the watch still needed (the caller reloads)."""
        next_revision = from_revision
        delay = 0.05
        while not self._closed:
            try:
                client = await self._connected()
                stub = aetcd.rpc.WatchStub(client.channel)
                create = aetcd.rpc.WatchRequest(
                    create_request=aetcd.rpc.WatchCreateRequest(
                        key=prefix.encode(),
                        range_end=prefix_end(prefix),
                        start_revision=next_revision,
                    )
                )
                call = stub.Watch(iter([create]), metadata=client.metadata)
                try:
                    async for response in call:
                        if response.compact_revision:
                            raise ClusterError(
                                f"etcd compacted revisions up to {response.compact_revision} "
                                f"before this node read them (it needed {next_revision})"
                            )
                        if response.canceled:
                            raise ClusterError(
                                f"etcd cancelled the watch: {response.cancel_reason}"
                            )
                        delay = 0.05
                        for batch in _by_revision(response.events):
                            next_revision = batch[0].revision + 1
                            yield batch
                finally:
                    call.cancel()
            except (aetcd.rpc.AioRpcError, aetcd.exceptions.ClientError, OSError) as exc:
                log.debug(
                    "watch of %s lost (%s); resuming at revision %d",
                    prefix,
                    _reason(exc),
                    next_revision,
                )
                self._failed(self._client)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


async def _close_later(client: aetcd.Client, delay: float) -> None:
    await asyncio.sleep(delay)
    with contextlib.suppress(Exception):
        await client.close()


def _by_revision(events: Any) -> list[list[Change]]:
    batches: list[list[Change]] = []
    for event in events:
        kv = event.kv
        change = Change(
            kv.key.decode(),
            None if event.type == aetcd.rpc.Event.DELETE else bytes(kv.value),
            int(kv.mod_revision),
        )
        if batches and batches[-1][0].revision == change.revision:
            batches[-1].append(change)
        else:
            batches.append([change])
    return batches


_TARGETS: dict[str, Any] = {
    "mod": aetcd.transactions.Mod,
    "create": aetcd.transactions.Create,
    "version": aetcd.transactions.Version,
    "value": aetcd.transactions.Value,
}


def _compare(c: Compare) -> Any:
    built = _TARGETS[c.target](c.key.encode())
    if c.op == "==":
        built = built == c.value
    elif c.op == "!=":
        built = built != c.value
    elif c.op == "<":
        built = built < c.value
    else:
        built = built > c.value
    return built.build_message()


def _op(op: Op) -> Any:
    key = op.key.encode()
    if isinstance(op, Put):
        return aetcd.transactions.Put(key, op.value, lease=op.lease or None)
    end = prefix_end(op.key) if op.prefix else None
    if isinstance(op, Delete):
        return aetcd.transactions.Delete(key, range_end=end)
    return aetcd.transactions.Get(key, range_end=end)


_GONE = (
    aetcd.exceptions.ConnectionFailedError,
    aetcd.exceptions.ConnectionTimeoutError,
    asyncio.TimeoutError,
    OSError,
)


def _unreachable(exc: BaseException) -> bool:
    """etcd could not be reached (or did not answer in time), as opposed to refusing."""
    if isinstance(exc, aetcd.rpc.AioRpcError):
        return exc.code() in (
            aetcd.rpc.StatusCode.UNAVAILABLE,
            aetcd.rpc.StatusCode.DEADLINE_EXCEEDED,
            aetcd.rpc.StatusCode.CANCELLED,
        )
    return isinstance(exc, _GONE)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, aetcd.rpc.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    cause = exc.__cause__
    if isinstance(cause, aetcd.rpc.AioRpcError):
        return f"{cause.code().name}: {cause.details()}"
    return str(exc) or type(exc).__name__
