"""Message mutators (the Agora seed's idea): a policy key ``message-mutators`` names a
chain of Python callables that transform, enrich, reject or drop each message on its way
into a queue. See docs/queues.md, "Message mutators".

A mutator is ``mutate(message, args) -> Message | None``: it gets the core ``Message``
(``exchange``, ``routing_key``, ``properties``, ``body``; ``with_properties`` makes a
changed copy) and the dict given for it in the policy's ``message-mutator-args``. It
returns the message to pass on (changed or not), or None to drop it. Raising
``Rejected(reason)`` refuses the message; any other exception is a failure (SystemExit
too: a plugin calling sys.exit() must not stop the broker; only asyncio.CancelledError
and KeyboardInterrupt pass through). Either way the message is dead-lettered (when the
queue has a dead-letter exchange, with header ``x-mutator-error``) and refused to a
confirming publisher (basic.nack).

Mutators run synchronously on the event loop, inside the publish: they must be quick
and must not block (no network calls, no waiting on locks or files).
"""

from roost.core.mutators.chain import (
    ARGS_KEY,
    POLICY_KEY,
    Chain,
    MutationRefused,
    MutatorStats,
    Rejected,
    chain_for,
    mutator_names,
    stats,
)
from roost.core.mutators.registry import Mutator, MutatorRegistry, registry

__all__ = [
    "ARGS_KEY",
    "POLICY_KEY",
    "Chain",
    "MutationRefused",
    "Mutator",
    "MutatorRegistry",
    "MutatorStats",
    "Rejected",
    "chain_for",
    "mutator_names",
    "registry",
    "stats",
]
