"""``x-message-deduplication``: the plugin's exchange type, a fanout that drops duplicates.

Routing is fanout's; the duplicate check runs before routing (``core.features.dedup``,
installed by the vhost like the ``x-message-deduplication`` argument of other types).
``x-cache-size`` is required, as the plugin requires it.
"""

from __future__ import annotations

from roost.core.exchanges.fanout import FanoutExchange
from roost.core.features.dedup import DedupCache


class DeduplicationExchange(FanoutExchange):
    kind = "x-message-deduplication"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.cache = DedupCache.from_arguments(
            self.arguments, f"exchange '{self.name}' in vhost '{self.vhost}'", size_required=True
        )
