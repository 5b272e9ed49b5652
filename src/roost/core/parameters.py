"""Runtime parameters, global parameters and operator policies (RabbitMQ's
``/api/parameters``, ``/api/global-parameters`` and ``/api/operator-policies``).

A runtime parameter is a JSON value under (vhost, component, name). Components are
RabbitMQ's: ``vhost-limits`` (its one name ``limits`` is the vhost's limits, the same
ones ``/api/vhost-limits`` sets), ``operator_policy`` (how RabbitMQ stores operator
policies, and how definitions files carry them), and ``shovel``, ``federation-upstream``
and ``federation-upstream-set``, kept for the shovels and federation that will read them
(until then they are stored, exported and imported, and do nothing). Any other component
is refused as RabbitMQ refuses one no plugin registered.

Operator policies are policies an operator sets over users' own: for the queue keys
both may set (max-length, max-length-bytes, message-ttl, expires, delivery-limit, and
the in-memory limits) the lower value applies (core/features/policies.py).

Every change ends in one typed event told through the catalog (core/events.py), so the
journal writes it and the policy applier follows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from roost.core.errors import NotFound, PreconditionFailed
from roost.core.events import (
    BrokerEvent,
    GlobalParameterChanged,
    GlobalParameterDeleted,
    OperatorPolicyChanged,
    OperatorPolicyDeleted,
    ParameterChanged,
    ParameterDeleted,
)
from roost.core.features.settings import _erlang, validate_policy_definition
from roost.core.info import GlobalParameterInfo, ParameterInfo, PolicyInfo
from roost.core.policy import OPERATOR_KEYS, Policy

if TYPE_CHECKING:
    from roost.core.ports.management import ParameterRuntime, ParameterWatcher
    from roost.core.vhost import VHost


class Limits(Protocol):
    """What parameters need of the catalog (core/catalog.py) for the vhost-limits
    component: the vhosts and their limits' own door."""

    vhosts: dict[str, VHost]

    def vhost(self, name: str) -> VHost: ...
    def put_vhost_limit(self, vhost: str, name: str, value: Any) -> None: ...
    def delete_vhost_limit(self, vhost: str, name: str) -> None: ...


VHOST_LIMITS = "vhost-limits"
OPERATOR_POLICY = "operator_policy"
COMPONENTS = (VHOST_LIMITS, OPERATOR_POLICY, "shovel", "federation-upstream",
              "federation-upstream-set")  # fmt: skip


def operator_item(policy: Policy) -> dict[str, Any]:
    """An operator policy as RabbitMQ's definitions carry it: a runtime parameter."""
    return {
        "vhost": policy.vhost,
        "component": OPERATOR_POLICY,
        "name": policy.name,
        "value": {
            "pattern": policy.pattern,
            "definition": policy.definition,
            "priority": policy.priority,
            "apply-to": policy.apply_to,
        },
    }


def operator_policy(
    vhost: str, name: str, pattern: Any, definition: Any, priority: Any, apply_to: Any
) -> Policy:
    """An operator policy, checked as RabbitMQ checks one: only the keys it may set."""
    if not isinstance(pattern, str):
        raise PreconditionFailed("pattern must be a string")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise PreconditionFailed("priority must be an integer")
    if not isinstance(apply_to, str):
        raise PreconditionFailed("apply-to must be a string")
    policy = Policy(vhost, name, pattern, definition, priority, apply_to)
    others = {k: v for k, v in policy.definition.items() if k not in OPERATOR_KEYS}
    if others:
        raise PreconditionFailed(
            f"Validation failed\n\n{_erlang(others)} are not recognised policy settings\n"
        )
    validate_policy_definition(policy.definition)
    return policy


def check_operator_policy(value: dict[str, Any]) -> None:
    """An operator policy as a definitions file's parameter value carries it."""
    operator_policy(
        "",
        "",
        value.get("pattern"),
        value.get("definition"),
        value.get("priority", 0),
        value.get("apply-to", "all"),
    )


class Parameters:
    """The runtime and global parameters and the operator policies; ``changed`` is the
    catalog's one door for events."""

    def __init__(self, catalog: Limits, changed: Callable[[BrokerEvent], None]) -> None:
        self._catalog = catalog
        self._changed = changed
        self.values: dict[tuple[str, str, str], Any] = {}
        self.global_values: dict[str, Any] = {}
        self.operator_policies: dict[tuple[str, str], Policy] = {}
        # what runs a component's parameters outside the core (roost.shovel)
        self._watchers: dict[str, list[ParameterWatcher]] = {}
        self._runtimes: dict[str, ParameterRuntime] = {}

    # -- what runs parameters (the management port's contract) ------------------------

    def watch(self, component: str, watcher: ParameterWatcher) -> None:
        self._watchers.setdefault(component, []).append(watcher)

    def attach_runtime(self, component: str, runtime: ParameterRuntime) -> None:
        self._runtimes[component] = runtime

    def runtime_status(self, component: str, vhost: str | None = None) -> list[dict[str, Any]]:
        runtime = self._runtimes.get(component)
        return [] if runtime is None else runtime.status(vhost)

    def runtime_restart(self, component: str, vhost: str, name: str) -> None:
        runtime = self._runtimes.get(component)
        if runtime is None:
            raise NotFound(f"nothing runs the component '{component}'")
        try:
            runtime.restart(vhost, name)
        except LookupError as exc:
            raise NotFound(str(exc)) from None

    def _tell(self, vhost: str, component: str, name: str, value: Any) -> None:
        for watcher in self._watchers.get(component, ()):
            watcher(vhost, name, value)

    # -- runtime parameters -----------------------------------------------------------

    def put_parameter(self, vhost: str, component: str, name: str, value: Any) -> bool:
        """Set a parameter; True when it is new."""
        self._catalog.vhost(vhost)
        if component not in COMPONENTS:
            raise PreconditionFailed(f"Validation failed\n\ncomponent {component} not found\n")
        if not isinstance(name, str) or not name:
            raise PreconditionFailed("parameter name must be a non-empty string")
        if component == VHOST_LIMITS:
            return self._put_limits(vhost, name, value)
        if component == OPERATOR_POLICY:
            if not isinstance(value, dict):
                raise PreconditionFailed("an operator policy's value must be an object")
            return self.put_operator_policy(
                vhost,
                name,
                pattern=value.get("pattern"),
                definition=value.get("definition"),
                priority=value.get("priority", 0),
                apply_to=value.get("apply-to", "all"),
            )
        # an upstream set is a list of upstreams, as RabbitMQ's federation takes it
        if not isinstance(value, dict) and not (
            component == "federation-upstream-set" and isinstance(value, list)
        ):
            raise PreconditionFailed(f"Validation failed\n\n{_erlang(value)} is not a proplist\n")
        runtime = self._runtimes.get(component)
        if runtime is not None:
            try:
                runtime.validate(vhost, name, value)
            except ValueError as exc:
                raise PreconditionFailed(f"Validation failed\n\n{exc}\n") from None
        created = (vhost, component, name) not in self.values
        self.values[(vhost, component, name)] = value
        self._changed(ParameterChanged(vhost, component, name, value))
        self._tell(vhost, component, name, value)
        return created

    def _put_limits(self, vhost: str, name: str, value: Any) -> bool:
        if name != "limits":
            raise PreconditionFailed("the vhost-limits component's one parameter is 'limits'")
        if not isinstance(value, dict):
            raise PreconditionFailed("vhost limits must be an object")
        catalog = self._catalog
        existing = catalog.vhost(vhost).limits
        created = not existing
        for limit in [n for n in existing if n not in value]:
            catalog.delete_vhost_limit(vhost, limit)
        for limit, n in value.items():
            catalog.put_vhost_limit(vhost, limit, n)
        return created

    def delete_parameter(self, vhost: str, component: str, name: str) -> None:
        if component == VHOST_LIMITS and name == "limits":
            for limit in list(self._catalog.vhost(vhost).limits):
                self._catalog.delete_vhost_limit(vhost, limit)
            return
        if component == OPERATOR_POLICY:
            self.delete_operator_policy(vhost, name)
            return
        value = self.values.pop((vhost, component, name), None)
        if value is None:
            raise NotFound(f"no parameter '{name}' of component '{component}' in vhost '{vhost}'")
        self._changed(ParameterDeleted(vhost, component, name, value))
        self._tell(vhost, component, name, None)

    def list_parameters(
        self, vhost: str | None = None, component: str | None = None
    ) -> list[ParameterInfo]:
        """Every parameter, vhost limits and operator policies included (as RabbitMQ
        lists them), optionally of one vhost or component."""
        out = [
            ParameterInfo(v.name, VHOST_LIMITS, "limits", dict(v.limits))
            for v in self._catalog.vhosts.values()
            if v.limits
        ]
        out += [
            ParameterInfo(p.vhost, OPERATOR_POLICY, p.name, operator_item(p)["value"])
            for p in self.operator_policies.values()
        ]
        out += [ParameterInfo(v, c, n, value) for (v, c, n), value in self.values.items()]
        return [
            p
            for p in out
            if (vhost is None or p.vhost == vhost)
            and (component is None or p.component == component)
        ]

    def parameter_info(self, vhost: str, component: str, name: str) -> ParameterInfo:
        for p in self.list_parameters(vhost, component):
            if p.name == name:
                return p
        raise NotFound(f"no parameter '{name}' of component '{component}' in vhost '{vhost}'")

    # -- global parameters ------------------------------------------------------------

    def put_global_parameter(self, name: str, value: Any) -> bool:
        if not isinstance(name, str) or not name:
            raise PreconditionFailed("parameter name must be a non-empty string")
        created = name not in self.global_values
        self.global_values[name] = value
        self._changed(GlobalParameterChanged(name, value))
        return created

    def delete_global_parameter(self, name: str) -> None:
        if name not in self.global_values:
            raise NotFound(f"no global parameter '{name}'")
        value = self.global_values.pop(name)
        self._changed(GlobalParameterDeleted(name, value))

    def list_global_parameters(self) -> list[GlobalParameterInfo]:
        return [GlobalParameterInfo(n, v) for n, v in self.global_values.items()]

    def global_parameter_info(self, name: str) -> GlobalParameterInfo:
        if name not in self.global_values:
            raise NotFound(f"no global parameter '{name}'")
        return GlobalParameterInfo(name, self.global_values[name])

    # -- operator policies ------------------------------------------------------------

    def put_operator_policy(
        self,
        vhost: str,
        name: str,
        *,
        pattern: Any,
        definition: Any,
        priority: Any = 0,
        apply_to: Any = "all",
    ) -> bool:
        self._catalog.vhost(vhost)
        if not isinstance(name, str) or not name:
            raise PreconditionFailed("policy name must be a non-empty string")
        policy = operator_policy(vhost, name, pattern, definition, priority, apply_to)
        created = (vhost, name) not in self.operator_policies
        self.operator_policies[(vhost, name)] = policy
        self._changed(OperatorPolicyChanged(policy))
        return created

    def delete_operator_policy(self, vhost: str, name: str) -> None:
        policy = self.operator_policies.pop((vhost, name), None)
        if policy is None:
            raise NotFound(f"no operator policy '{name}' in vhost '{vhost}'")
        self._changed(OperatorPolicyDeleted(policy))

    def list_operator_policies(self, vhost: str | None = None) -> list[PolicyInfo]:
        return [
            PolicyInfo(p.vhost, p.name, p.pattern, p.apply_to, p.definition, p.priority)
            for p in self.operator_policies.values()
            if vhost is None or p.vhost == vhost
        ]

    def operator_policy_info(self, vhost: str, name: str) -> PolicyInfo:
        found = [p for p in self.list_operator_policies(vhost) if p.name == name]
        if not found:
            raise NotFound(f"no operator policy '{name}' in vhost '{vhost}'")
        return found[0]

    def forget_vhost(self, vhost: str) -> None:
        """A deleted vhost's parameters and operator policies go with it (the journal
        drops them with the vhost's record)."""
        for key in [k for k in self.values if k[0] == vhost]:
            del self.values[key]
            self._tell(*key, None)
        for pkey in [k for k in self.operator_policies if k[0] == vhost]:
            del self.operator_policies[pkey]
