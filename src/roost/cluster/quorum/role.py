"""What a quorum queue's leader and a replicated stream's leader share: who the
members are and what a majority of them holds on disk."""

from __future__ import annotations


class LeaderRole:
    """Subclasses keep ``node`` (this one), ``members``, ``own_durable`` and ``acked``
    (member -> the position it holds on disk), and implement ``_commit``."""

    node: str
    members: list[str]
    own_durable: int
    acked: dict[str, int]

    @property
    def leader(self) -> str:
        return self.node

    @property
    def followers(self) -> list[str]:
        return [m for m in self.members if m != self.node]

    @property
    def majority(self) -> int:
        return len(self.members) // 2 + 1

    def _own(self, end: int, ok: bool) -> None:
        if ok:
            self.own_durable = max(self.own_durable, end)
            self._commit()

    def _commit(self) -> None:
        raise NotImplementedError

    def _majority_holds(self) -> int:
        """The position a majority (this leader counted) holds on disk."""
        held = sorted(
            [self.own_durable, *(self.acked.get(m, 0) for m in self.followers)], reverse=True
        )
        return held[self.majority - 1]
