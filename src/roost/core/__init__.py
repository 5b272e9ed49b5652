"""The broker model, independent of any wire protocol.

What protocol adapters and the management API may use of the core is exported here (and
from the two port modules): the ports, the message types, the neutral errors, the
management snapshots and a connection's byte counters. Nothing else of ``roost.core`` is
imported from outside it except by the server, which wires it (docs/architecture.md; the
import-linter contracts in pyproject.toml enforce it). Modules inside the core never
import from here.
"""

from roost.core.client import Traffic
from roost.core.completion import Completion
from roost.core.errors import (
    AccessRefused,
    BrokerError,
    CommandInvalid,
    InternalError,
    NotAllowed,
    NotFound,
    NotImplementedFeature,
    PreconditionFailed,
    ResourceError,
    ResourceLocked,
)
from roost.core.features.consumer_timeout import ACK_TIMEOUT
from roost.core.features.direct_reply import REPLY_TO as DIRECT_REPLY_TO
from roost.core.message import EMPTY_PROPERTIES, Message, Properties
from roost.core.ports.adapter import AdapterPort
from roost.core.ports.management import ManagementPort

__all__ = [
    "ACK_TIMEOUT",
    "DIRECT_REPLY_TO",
    "EMPTY_PROPERTIES",
    "AccessRefused",
    "AdapterPort",
    "BrokerError",
    "CommandInvalid",
    "Completion",
    "InternalError",
    "ManagementPort",
    "Message",
    "NotAllowed",
    "NotFound",
    "NotImplementedFeature",
    "PreconditionFailed",
    "Properties",
    "ResourceError",
    "ResourceLocked",
    "Traffic",
]
