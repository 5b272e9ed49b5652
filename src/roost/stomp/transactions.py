"""BEGIN, COMMIT and ABORT: a transaction's SENDs, ACKs and NACKs wait in it; COMMIT's
RECEIPT waits for the fsync of what they wrote."""

from __future__ import annotations

from functools import partial

from mypy_extensions import trait

from roost.core.errors import BrokerError
from roost.stomp.errors import StompError
from roost.stomp.frames import Frame
from roost.stomp.session_state import SessionState


@trait  # a part of the compiled StompHandler (docs/compiled.md)
class Transactions(SessionState):
    def on_begin(self, frame: Frame) -> None:
        tx = self._require(frame, "transaction")
        if tx in self.transactions:
            raise StompError("invalid transaction", f"transaction '{tx}' is already active")
        self.transactions[tx] = []

    def on_commit(self, frame: Frame) -> None:
        tx = self._require(frame, "transaction")
        work = self.transactions.pop(tx, None)
        if work is None:
            raise StompError("invalid transaction", f"transaction '{tx}' is not active")
        # like AMQP's tx.commit-ok, the receipt waits for the fsync of what the
        # transaction's SENDs wrote to durable queues
        receipt = frame.get("receipt")
        completion = self.broker.durable_from_here()
        for op in work:
            op()
        if not completion.then(partial(self._committed, receipt)):
            self._committed(receipt, None)

    def _committed(self, receipt: str | None, _error: BrokerError | None) -> None:
        if receipt is None or self.closed:
            return
        self.write_frame("RECEIPT", [("receipt-id", receipt)])

    def on_abort(self, frame: Frame) -> None:
        tx = self._require(frame, "transaction")
        if self.transactions.pop(tx, None) is None:
            raise StompError("invalid transaction", f"transaction '{tx}' is not active")
