"""Every federation link of this node, kept in step with the policies, the
``federation-upstream`` and ``federation-upstream-set`` parameters and the exchanges and
queues they match. The management port tells of every definition change as it happens
(``queries.follow``, the typed events of core/events.py); a change that can alter which
links run wakes one look that starts the links that should run and stops the others. A
binding change wakes only the exchange links of its exchange. Nothing is looked at while
nothing changes.

It is also the management port's ``ParameterRuntime`` for both components: a value is
checked before it is stored, and ``/api/federation-links`` shows the links."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from roost.core.events import (
    BindingAdded,
    BindingRemoved,
    Event,
    ExchangeDeclared,
    ExchangeDeleted,
    ParameterChanged,
    ParameterDeleted,
    PolicyChanged,
    PolicyDeleted,
    QueueDeclared,
    QueueDeleted,
    VHostChanged,
    VHostDeleted,
)
from roost.federation.link import ExchangeLink, Link, QueueLink, Where
from roost.federation.spec import Upstream, parse_upstream, parse_upstream_set, with_overrides

if TYPE_CHECKING:
    from collections.abc import Callable

    from roost.core.info import PolicyInfo
    from roost.core.ports.management import DefinitionQueries, ParametersAdmin

UPSTREAM, UPSTREAM_SET = "federation-upstream", "federation-upstream-set"
log = logging.getLogger("roost.federation")
Key = tuple[str, str, str, str]  # vhost, "exchange" or "queue", its name, upstream name


class NoSuchLink(LookupError):
    pass


class _SetRuntime:
    """The ``federation-upstream-set`` component's check; its links show as upstreams'."""

    def validate(self, vhost: str, name: str, value: Any) -> None:
        parse_upstream_set(value)

    def status(self, vhost: str | None = None) -> list[dict[str, Any]]:
        return []

    def restart(self, vhost: str, name: str) -> None:
        raise NoSuchLink(f"no federation link '{name}' in vhost '{vhost}'")


class Federation:
    def __init__(
        self,
        parameters: ParametersAdmin,
        queries: DefinitionQueries,
        *,
        local_port: int,
        node: str,
        cluster_name: Callable[[], str],
    ) -> None:
        """``cluster_name``: the name this node announces to AMQP clients (the activity's),
        which the loop check looks for in ``x-received-from``."""
        self._parameters, self._queries = parameters, queries
        self._local_port, self._node = local_port, node
        self._cluster_name = cluster_name
        self.links: dict[Key, Link] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self.looks = 0  # how many times the links were compared with the policies

    def start(self) -> None:
        self._parameters.attach_runtime(UPSTREAM, self)
        self._parameters.attach_runtime(UPSTREAM_SET, _SetRuntime())
        self._queries.follow(self._changed)
        self._wake.set()  # the first look: the definitions recovered at start
        self._task = asyncio.get_running_loop().create_task(self._follow())

    def _changed(self, event: Event) -> None:
        """Told inside every definition change: note what to look at, look later."""
        match event:
            case BindingAdded(binding=b) | BindingRemoved(binding=b):
                where = ("exchange", b.source.vhost, b.source.name)
                for link in self.links.values():
                    if (link.kind, link.vhost, link.resource) == where:
                        link.poke()
            case ParameterChanged(component=c) | ParameterDeleted(component=c):
                if c in (UPSTREAM, UPSTREAM_SET):
                    self._wake.set()
            case (
                PolicyChanged()
                | PolicyDeleted()
                | ExchangeDeclared()
                | ExchangeDeleted()
                | QueueDeclared()
                | QueueDeleted()
                | VHostChanged()
                | VHostDeleted()
            ):
                self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        links, self.links = list(self.links.values()), {}
        await asyncio.gather(*(link.stop() for link in links))

    async def _follow(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()  # changes made during this look wake the next one
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:  # a vhost deleted under our feet: the next change looks again
                log.exception("federation: following the policies failed")

    async def _step(self) -> None:
        self.looks += 1
        want = self.wanted()
        for key in [k for k, link in self.links.items() if want.get(k) != link.upstream]:
            await self.links.pop(key).stop()
        where = Where(self._local_port, self._cluster_name(), self._node, self._queries)
        for key, upstream in want.items():
            if key not in self.links:
                vhost, kind, resource, _ = key
                cls = ExchangeLink if kind == "exchange" else QueueLink
                link = self.links[key] = cls(vhost, resource, upstream, where)
                link.start()

    def wanted(self) -> dict[Key, Upstream]:
        """The links the policies ask for now, each with its upstream."""
        q = self._queries
        out: dict[Key, Upstream] = {}
        vhosts = {p.vhost for p in q.list_policies() if _federates(p)}
        for vhost in vhosts:
            for ex in q.list_exchanges(vhost):
                federated = _federates(ex.policy, "exchanges")
                if ex.name and not ex.name.startswith("amq.") and federated:
                    assert ex.policy is not None
                    for up in self._upstreams(vhost, ex.policy):
                        out[(vhost, "exchange", ex.name, up.name)] = up
            for queue in q.list_queues(vhost):
                if _federates(queue.policy, "queues") and not queue.exclusive:
                    assert queue.policy is not None
                    for up in self._upstreams(vhost, queue.policy):
                        out[(vhost, "queue", queue.name, up.name)] = up
        return out

    def _upstreams(self, vhost: str, policy: PolicyInfo) -> list[Upstream]:
        values = {p.name: p.value for p in self._parameters.list_parameters(vhost, UPSTREAM)}
        found: list[Upstream] = []
        d = policy.definition

        def add(name: str, entry: dict[str, Any] | None = None) -> None:
            if name not in values:
                return  # RabbitMQ too runs no link for an upstream not (yet) defined
            try:
                up = parse_upstream(name, values[name])
                found.append(with_overrides(up, entry, values[name]) if entry else up)
            except ValueError as exc:
                log.warning("federation upstream '%s' in vhost '%s' not used: %s", name, vhost, exc)

        if isinstance(d.get(UPSTREAM), str):
            add(d[UPSTREAM])
        elif d.get(UPSTREAM_SET) == "all":
            for name in values:
                add(name)
        elif isinstance(d.get(UPSTREAM_SET), str):
            sets = {p.name: p.value for p in self._parameters.list_parameters(vhost, UPSTREAM_SET)}
            entries = sets.get(d[UPSTREAM_SET])
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("upstream"), str):
                    add(entry["upstream"], entry)
        return found

    # -- the management port's ParameterRuntime ---------------------------------------

    def validate(self, vhost: str, name: str, value: Any) -> None:
        parse_upstream(name, value)

    def status(self, vhost: str | None = None) -> list[dict[str, Any]]:
        return [link.row() for link in self.links.values() if vhost is None or link.vhost == vhost]

    def restart(self, vhost: str, name: str) -> None:
        """``name``: the link's id, as RabbitMQ's restart takes it."""
        for key, link in self.links.items():
            if link.vhost == vhost and link.id == name:
                self._later(link)
                self.links.pop(key)
                self._wake.set()  # the next look starts it afresh
                return
        raise NoSuchLink(f"no federation link '{name}' in vhost '{vhost}'")

    def _later(self, link: Link) -> None:
        task = asyncio.get_running_loop().create_task(link.stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)


def _federates(policy: PolicyInfo | None, kind: str | None = None) -> bool:
    if policy is None or (kind is not None and policy.apply_to not in ("all", kind)):
        return False
    return UPSTREAM in policy.definition or UPSTREAM_SET in policy.definition
