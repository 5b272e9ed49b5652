"""Every shovel of this node, kept in step with the ``shovel`` runtime parameters
through the management port: a parameter set starts (or restarts) its worker, a
parameter cleared stops it. It is also the port's ``ParameterRuntime`` for the
component: the check of a value before it is stored, ``/api/shovels`` and restart."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from roost.shovel.spec import parse_spec
from roost.shovel.worker import Worker

if TYPE_CHECKING:
    from roost.core.ports.management import ParametersAdmin

COMPONENT = "shovel"
STATIC_VHOST = "/"
log = logging.getLogger("roost.shovel")


class NoSuchShovel(LookupError):
    pass


class Owners(Protocol):
    """Which node of a cluster runs a key (``roost.cluster.owners``: an etcd election)."""

    def owns(self, key: str) -> bool: ...

    def claim(self, key: str, changed: Callable[[bool], None]) -> None: ...

    async def release(self, key: str) -> None: ...


class Shovels:
    def __init__(self, parameters: ParametersAdmin, *, local_port: int, node: str,
                 static: dict[str, Any] | None = None,
                 owners: Owners | None = None) -> None:
        """``local_port``: this node's AMQP listener, where ``amqp://`` with no host goes;
        ``static``: the config file's shovels (name: value), run in vhost ``/``;
        ``owners``: in a cluster, the election that says which node runs each dynamic
        shovel (its parameter is on every node; as in RabbitMQ, one node runs it)."""
        self._owners = owners
        self._values: dict[tuple[str, str], Any] = {}  # every dynamic shovel's parameter
        self._parameters = parameters
        self._static = {name: parse_spec(value) for name, value in (static or {}).items()}
        self._local_port, self._node = local_port, node
        self.workers: dict[tuple[str, str], Worker] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Run the shovels already defined (recovered, or imported at boot) and follow
        every change from now on."""
        for p in self._parameters.list_parameters(component=COMPONENT):
            self._changed(p.vhost, p.name, p.value)
        self._parameters.watch(COMPONENT, self._changed)
        self._parameters.attach_runtime(COMPONENT, self)
        for name in self._static:
            self._start_static(name)

    def _start_static(self, name: str) -> None:
        """A static shovel: as RabbitMQ's, it runs as long as the node and is not a
        parameter (the API can restart it, not delete it). Keyed apart from dynamic
        shovels (a NUL before its name), so a parameter of the same name is another one."""
        worker = Worker(STATIC_VHOST, name, self._static[name], local_port=self._local_port,
                        node=self._node, finished=self._static_done, kind="static")
        self.workers[(STATIC_VHOST, f"\0{name}")] = worker
        worker.start()

    def _static_done(self, vhost: str, name: str) -> None:
        log.info("static shovel '%s' done: src-delete-after reached", name)

    async def stop(self) -> None:
        workers, self.workers = list(self.workers.values()), {}
        await asyncio.gather(*(w.stop() for w in workers), *self._stopping)
        if self._owners is not None:  # after the workers: never two running at once
            for vhost, name in list(self._values):
                await self._owners.release(f"shovel/{vhost}/{name}")

    def _changed(self, vhost: str, name: str, value: Any) -> None:
        old = self.workers.pop((vhost, name), None)
        if old is not None:
            self._later(old.stop())
        key = f"shovel/{vhost}/{name}"
        if value is None:
            self._values.pop((vhost, name), None)
            if self._owners is not None:
                self._later(self._owners.release(key))
            return
        self._values[(vhost, name)] = value
        if self._owners is not None and not self._owners.owns(key):
            self._owners.claim(key, lambda mine: self._owned(vhost, name, mine))
            return  # started once this node holds it
        self._run(vhost, name, value)

    def _owned(self, vhost: str, name: str, mine: bool) -> None:
        """The election: this node now runs the shovel, or no longer does (its unacked
        messages go back to the source)."""
        value = self._values.get((vhost, name))
        old = self.workers.pop((vhost, name), None)
        if old is not None:
            self._later(old.stop())
        if mine and value is not None:
            self._run(vhost, name, value)

    def _run(self, vhost: str, name: str, value: Any) -> None:
        try:
            spec = parse_spec(value)
        except ValueError as exc:  # stored before validation existed, or imported
            log.warning("shovel '%s' in vhost '%s' not started: %s", name, vhost, exc)
            return
        owners, key = self._owners, f"shovel/{vhost}/{name}"
        worker = Worker(vhost, name, spec, local_port=self._local_port, node=self._node,
                        finished=self._finished,
                        may_run=None if owners is None else lambda: owners.owns(key))
        self.workers[(vhost, name)] = worker
        worker.start()

    def _later(self, stopping: Any) -> None:
        task = asyncio.get_running_loop().create_task(stopping)
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    def _finished(self, vhost: str, name: str) -> None:
        """src-delete-after reached: the shovel deletes itself, as RabbitMQ's does."""
        log.info("shovel '%s' in vhost '%s' done: deleting it", name, vhost)
        try:
            self._parameters.delete_parameter(vhost, COMPONENT, name)
        except Exception:  # already cleared meanwhile
            log.debug("shovel '%s' in vhost '%s' was already cleared", name, vhost)

    # -- the management port's ParameterRuntime -------------------------------------------

    def validate(self, vhost: str, name: str, value: Any) -> None:
        parse_spec(value)

    def status(self, vhost: str | None = None) -> list[dict[str, Any]]:
        return [w.row() for w in self.workers.values() if vhost is None or w.vhost == vhost]

    def restart(self, vhost: str, name: str) -> None:
        static = self.workers.get((vhost, f"\0{name}"))
        if static is not None and self.workers.get((vhost, name)) is None:
            self._later(static.stop())
            self._start_static(name)
            return
        worker = self.workers.get((vhost, name))
        if worker is None:
            raise NoSuchShovel(f"no shovel '{name}' in vhost '{vhost}'")
        self._changed(vhost, name, next(
            p.value for p in self._parameters.list_parameters(vhost, COMPONENT) if p.name == name))
