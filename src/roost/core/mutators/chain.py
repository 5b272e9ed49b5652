"""A queue's chain of mutators, built from its policy, and what the chain counts."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from roost.core.message import Message
from roost.core.mutators.registry import Mutator, registry

log = logging.getLogger("roost.mutators")

POLICY_KEY = "message-mutators"
ARGS_KEY = "message-mutator-args"
WARN_EVERY = 10.0  # seconds: one log line per failing mutator at most this often


class Rejected(Exception):
    """Raised by a mutator to refuse a message (not a failure of the mutator)."""


@dataclass
class MutatorStats:
    """Broker-wide counters (``/metrics``)."""

    failures: int = 0  # a mutator raised something other than Rejected
    rejected: int = 0  # a mutator raised Rejected
    dropped: int = 0  # a mutator returned None


stats = MutatorStats()


class MutationRefused(Exception):
    """The chain refused the message: ``error`` goes into ``x-mutator-error``."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class Chain:
    """Runs the mutators in order; None when one drops the message."""

    def __init__(self, steps: list[tuple[str, Mutator | None, dict[str, Any], str]]) -> None:
        # (name, callable or None when it could not be loaded, args, load error)
        self.steps = steps
        self.names = [name for name, *_ in steps]
        self._warned: dict[str, float] = {}

    def run(self, message: Message) -> Message | None:
        for name, mutate, args, load_error in self.steps:
            if mutate is None:  # fail closed: a filter that cannot run lets nothing by
                stats.failures += 1
                self._warn(name, load_error)
                raise MutationRefused(f"{name}: {load_error}")
            try:
                out = mutate(message, args)
            except Rejected as exc:
                stats.rejected += 1
                raise MutationRefused(f"{name}: {exc}") from None
            except (asyncio.CancelledError, KeyboardInterrupt):
                raise  # stop signals from outside the mutator: the loop's, the operator's
            except BaseException as exc:  # a plugin's bug, sys.exit() included, is a failure
                stats.failures += 1
                text = f"{type(exc).__name__}: {exc}"
                self._warn(name, text)
                raise MutationRefused(f"{name} failed: {text}") from None
            if out is None:
                stats.dropped += 1
                return None
            if not isinstance(out, Message):
                stats.failures += 1
                self._warn(name, f"returned {type(out).__name__}, not a Message")
                raise MutationRefused(f"{name} failed: returned {type(out).__name__}")
            message = out
        return message

    def _warn(self, name: str, text: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(name, -WARN_EVERY) >= WARN_EVERY:
            self._warned[name] = now
            log.warning("mutator %s: %s (the message is refused)", name, text)


def mutator_names(spec: Any) -> list[str] | None:
    """The names a ``message-mutators`` value lists (a list of names or one
    comma-separated string), or None when it is not such a value."""
    if isinstance(spec, str):
        names = [n.strip() for n in spec.split(",")]
    elif isinstance(spec, list) and all(isinstance(n, str) for n in spec):
        names = [n.strip() for n in spec]
    else:
        return None
    return names if names and all(names) else None


def chain_for(definition: dict[str, Any] | None) -> Chain | None:
    """The chain a policy definition asks for, or None when it names no mutators.

    Never raises: policies are validated when set (core.features.settings), and a value
    that got past that (a definitions file edited by hand) gives a chain that refuses
    every message, as a mutator that cannot be loaded does."""
    if not definition or POLICY_KEY not in definition:
        return None
    spec = definition[POLICY_KEY]
    names = mutator_names(spec)
    if names is None:
        problem = f"{POLICY_KEY} {spec!r} is not a list of names"
        log.error("policy: %s", problem)
        return Chain([(POLICY_KEY, None, {}, problem)])
    all_args = definition.get(ARGS_KEY)
    steps: list[tuple[str, Mutator | None, dict[str, Any], str]] = []
    for name in names:
        args = all_args.get(name) if isinstance(all_args, dict) else None
        if args is not None and not isinstance(args, dict):
            steps.append((name, None, {}, f"its {ARGS_KEY} are not an object"))
            continue
        try:
            steps.append((name, registry.get(name), dict(args or {}), ""))
        except KeyError as exc:
            log.error("policy names %s", exc.args[0])
            steps.append((name, None, {}, str(exc.args[0])))
    return Chain(steps)
