"""Federation: RabbitMQ's federation plugin for Roost (docs/federation.md).

Policies with ``federation-upstream`` or ``federation-upstream-set`` make exchanges and
queues of this node federated from the upstreams that the ``federation-upstream``
parameters describe; each (exchange or queue, upstream) pair is a link, an AMQP client
of both brokers built on ``roost.client``, as the shovels are.

- ``spec``: upstream and upstream set values, checked, with RabbitMQ 3.10's defaults;
- ``link``: one exchange or queue link (connections, bindings or demand, forwarding);
- ``runtime``: every link of the node, following policies and parameters, and the
  status ``/api/federation-links`` shows.

It imports only ``roost.client``, the shovel's URI helpers and the management port (an
import-linter contract).
"""

from roost.federation.runtime import Federation

__all__ = ["Federation"]
