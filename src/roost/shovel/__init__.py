"""Dynamic shovels: RabbitMQ's shovel plugin for Roost (docs/shovels.md).

A shovel is a runtime parameter of component ``shovel``; for each one, a worker
consumes from a source broker and publishes to a destination broker with
``roost.client``, acking the source as its ``ack-mode`` says, and starts again after
``reconnect-delay`` when either side fails.

- ``spec``: the parameter's keys, checked and given RabbitMQ 3.10's defaults;
- ``worker``: one shovel's connections, consume-publish-ack loop and status;
- ``runtime``: every shovel of the node, kept in step with the parameters through the
  management port (``watch``), and its status and restart for ``/api/shovels``.

It is an AMQP client of the brokers it links, the local one included: it imports only
``roost.client`` and the management port (an import-linter contract).
"""

from roost.shovel.runtime import Shovels
from roost.shovel.spec import ShovelSpec, parse_spec

__all__ = ["ShovelSpec", "Shovels", "parse_spec"]
