"""A queue's effective lifecycle settings: its x-arguments merged with its policy.

RabbitMQ's merge (rabbit_amqqueue_process): for expires, message-ttl, max-length,
max-length-bytes and delivery-limit the lower of argument and policy wins; for
dead-letter-exchange, dead-letter-routing-key and overflow the argument wins.
Argument and policy errors read like RabbitMQ's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from roost.core.errors import PreconditionFailed
from roost.core.field_types import field_type as type_name
from roost.core.mutators import ARGS_KEY as MUTATOR_ARGS_KEY
from roost.core.mutators import POLICY_KEY as MUTATORS_KEY
from roost.core.mutators import mutator_names, registry

OVERFLOW_MODES = ("drop-head", "reject-publish", "reject-publish-dlx")
# where a cluster places a new queue (roost.cluster.placement): RabbitMQ's values, the
# older ones of each key taken as ``balanced``
LOCATORS = {
    "x-queue-leader-locator": ("client-local", "balanced", "random", "least-leaders"),
    "x-queue-master-locator": ("client-local", "min-masters", "random"),
}

# argument -> policy key, for the keys merged by taking the lower value
_MIN_KEYS = {
    "x-expires": "expires",
    "x-message-ttl": "message-ttl",
    "x-max-length": "max-length",
    "x-max-length-bytes": "max-length-bytes",
    "x-delivery-limit": "delivery-limit",
}
# argument -> policy key, for the keys where a queue argument wins
_ARG_KEYS = {
    "x-dead-letter-exchange": "dead-letter-exchange",
    "x-dead-letter-routing-key": "dead-letter-routing-key",
    "x-overflow": "overflow",
}


@dataclass(frozen=True, slots=True)
class QueueSettings:
    message_ttl: int | None = None  # ms
    expires: int | None = None  # ms
    dlx: str | None = None
    dlx_routing_key: str | None = None
    max_length: int | None = None
    max_length_bytes: int | None = None
    overflow: str = "drop-head"
    delivery_limit: int | None = None

    @property
    def active(self) -> bool:
        return self != _DEFAULT

    @property
    def limited(self) -> bool:
        return self.max_length is not None or self.max_length_bytes is not None


_DEFAULT = QueueSettings()


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_arguments(arguments: dict[str, Any], queue: str, vhost: str) -> None:
    """Refuse a declaration whose lifecycle arguments RabbitMQ would refuse."""

    def invalid(key: str, why: str) -> PreconditionFailed:
        return PreconditionFailed(
            f"invalid arg '{key}' for queue '{queue}' in vhost '{vhost}': {why}"
        )

    for key in _MIN_KEYS:
        if key not in arguments:
            continue
        value = arguments[key]
        if not _is_int(value):
            raise invalid(key, f'"expected integer, got {type_name(value)}"')
        if value < 0:
            raise invalid(key, f"{{value_negative,{value}}}")
        if value == 0 and key == "x-expires":
            raise invalid(key, "{value_zero,0}")
    for key in ("x-dead-letter-exchange", "x-dead-letter-routing-key"):
        if key in arguments and not isinstance(arguments[key], str | bytes):
            raise PreconditionFailed(
                f"invalid type '{type_name(arguments[key])}' for arg '{key}' in queue "
                f"'{queue}' in vhost '{vhost}'"
            )
    if "x-dead-letter-routing-key" in arguments and "x-dead-letter-exchange" not in arguments:
        raise invalid("x-dead-letter-routing-key", "routing_key_but_no_dlx_defined")
    if "x-overflow" in arguments and _text(arguments["x-overflow"]) not in OVERFLOW_MODES:
        raise invalid("x-overflow", "invalid_overflow")
    for key, values in LOCATORS.items():  # RabbitMQ 3.12's check (3.10's quorum queues')
        value = arguments.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise invalid(key, f"{{unacceptable_type,{type_name(value)}}}")
        if value not in values:
            raise invalid(key, "invalid_queue_locator_arg")


def _erlang(value: Any) -> str:
    """A JSON value as RabbitMQ prints it in a policy validation error (~p)."""
    if isinstance(value, str):
        return f'<<"{value}">>'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(_erlang(v) for v in value) + "]"
    if isinstance(value, dict):  # a JSON object decodes to a proplist in RabbitMQ
        return "[" + ",".join(f"{{{_erlang(k)},{_erlang(v)}}}" for k, v in value.items()) + "]"
    return str(value)


_POLICY_CHECKS: dict[str, tuple[str, int | None]] = {
    # key -> (what the error calls it, lowest integer allowed; None: a string)
    "message-ttl": ("message TTL", 0),
    "expires": ("queue expiry", 1),
    "max-length": ("maximum length", 0),
    "max-length-bytes": ("maximum length in bytes", 0),
    "delivery-limit": ("delivery limit", 0),
    "dead-letter-exchange": ("dead letter exchange", None),
    "dead-letter-routing-key": ("dead letter routing key", None),
}


# keys a user may expect a policy to take but RabbitMQ refuses in one: queue arguments
# only (other keys Roost does not know are let through: a RabbitMQ plugin's, such as
# federation-upstream, must not fail a definitions import)
_ARGUMENT_ONLY = ("max-priority",)


def validate_policy_definition(definition: dict[str, Any], *, check_mutators: bool = True) -> None:
    """RabbitMQ's checks of the queue keys a policy may set, and Roost's of its mutator
    keys. ``check_mutators``: also refuse mutator names that no entry point or
    ``ROOST_MUTATORS`` provides (off when recovering: a plugin uninstalled since must
    not cost the policy; its chain then refuses every message, fail closed)."""
    problems = []
    refused = {k: v for k, v in definition.items() if k in _ARGUMENT_ONLY}
    if refused:
        problems.append(f"{_erlang(refused)} are not recognised policy settings")
    for key, value in definition.items():
        if key == MUTATORS_KEY:
            problems.extend(_mutator_problems(value, check_mutators))
            continue
        if key == MUTATOR_ARGS_KEY:
            ok = isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())
            what = "set of message mutator arguments (an object of objects)"
        elif key == "overflow":
            ok = value in OVERFLOW_MODES
            what = "overflow value"
        elif key == "queue-leader-locator":
            ok = value in LOCATORS["x-queue-leader-locator"]
            what = "queue leader locator value"
        elif key in _POLICY_CHECKS:
            what, low = _POLICY_CHECKS[key]
            ok = isinstance(value, str) if low is None else _is_int(value) and value >= low
        else:
            continue
        if not ok:
            problems.append(f"{_erlang(value)} is not a valid {what}")
    if problems:
        raise PreconditionFailed("Validation failed\n\n" + "\n".join(problems) + "\n")


def _mutator_problems(value: Any, check_names: bool) -> list[str]:
    names = mutator_names(value)
    if names is None:
        return [f"{_erlang(value)} is not a valid list of message mutators"]
    problems = []
    for name in names if check_names else ():
        try:
            registry.get(name)
        except KeyError as exc:
            problems.append(f"{_erlang(name)} is not a valid message mutator: {exc.args[0]}")
    return problems


def resolve(arguments: dict[str, Any], policy: dict[str, Any] | None) -> QueueSettings:
    """The settings in force for a queue with these arguments under this policy."""
    policy = policy or {}
    ints: dict[str, int | None] = {}
    for arg, key in _MIN_KEYS.items():
        values = [v for v in (arguments.get(arg), policy.get(key)) if _is_int(v)]
        values = [v for v in values if v >= 0]
        ints[arg] = min(values) if values else None
    texts: dict[str, str | None] = {}
    for arg, key in _ARG_KEYS.items():
        value = _text(arguments[arg]) if arg in arguments else policy.get(key)
        texts[arg] = value if isinstance(value, str) else None
    overflow = texts["x-overflow"]
    expires = ints["x-expires"]
    return QueueSettings(
        message_ttl=ints["x-message-ttl"],
        expires=expires if expires else None,
        dlx=texts["x-dead-letter-exchange"],
        dlx_routing_key=texts["x-dead-letter-routing-key"],
        max_length=ints["x-max-length"],
        max_length_bytes=ints["x-max-length-bytes"],
        overflow=overflow if overflow in OVERFLOW_MODES else "drop-head",
        delivery_limit=ints["x-delivery-limit"],
    )
