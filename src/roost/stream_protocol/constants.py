"""Command keys, response codes, offset specification types and chunk constants of the
RabbitMQ stream protocol (PROTOCOL.adoc in rabbitmq-server's deps/rabbitmq_stream/docs,
"Response Codes" and "Commands"; the chunk layout is osiris_log.erl's header comment).
"""

from __future__ import annotations

from typing import Final

RESPONSE_FLAG: Final = 0x8000  # the key's high bit: set on a response

# command keys
DECLARE_PUBLISHER: Final = 0x0001
PUBLISH: Final = 0x0002
PUBLISH_CONFIRM: Final = 0x0003
PUBLISH_ERROR: Final = 0x0004
QUERY_PUBLISHER_SEQUENCE: Final = 0x0005
DELETE_PUBLISHER: Final = 0x0006
SUBSCRIBE: Final = 0x0007
DELIVER: Final = 0x0008
CREDIT: Final = 0x0009
STORE_OFFSET: Final = 0x000A
QUERY_OFFSET: Final = 0x000B
UNSUBSCRIBE: Final = 0x000C
CREATE: Final = 0x000D
DELETE: Final = 0x000E
METADATA: Final = 0x000F
METADATA_UPDATE: Final = 0x0010
PEER_PROPERTIES: Final = 0x0011
SASL_HANDSHAKE: Final = 0x0012
SASL_AUTHENTICATE: Final = 0x0013
TUNE: Final = 0x0014
OPEN: Final = 0x0015
CLOSE: Final = 0x0016
HEARTBEAT: Final = 0x0017
ROUTE: Final = 0x0018
PARTITIONS: Final = 0x0019
CONSUMER_UPDATE: Final = 0x001A
EXCHANGE_COMMAND_VERSIONS: Final = 0x001B
STREAM_STATS: Final = 0x001C
CREATE_SUPER_STREAM: Final = 0x001D
DELETE_SUPER_STREAM: Final = 0x001E
RESOLVE_OFFSET_SPEC: Final = 0x001F

COMMAND_NAMES: Final = {
    DECLARE_PUBLISHER: "DeclarePublisher",
    PUBLISH: "Publish",
    PUBLISH_CONFIRM: "PublishConfirm",
    PUBLISH_ERROR: "PublishError",
    QUERY_PUBLISHER_SEQUENCE: "QueryPublisherSequence",
    DELETE_PUBLISHER: "DeletePublisher",
    SUBSCRIBE: "Subscribe",
    DELIVER: "Deliver",
    CREDIT: "Credit",
    STORE_OFFSET: "StoreOffset",
    QUERY_OFFSET: "QueryOffset",
    UNSUBSCRIBE: "Unsubscribe",
    CREATE: "Create",
    DELETE: "Delete",
    METADATA: "Metadata",
    METADATA_UPDATE: "MetadataUpdate",
    PEER_PROPERTIES: "PeerProperties",
    SASL_HANDSHAKE: "SaslHandshake",
    SASL_AUTHENTICATE: "SaslAuthenticate",
    TUNE: "Tune",
    OPEN: "Open",
    CLOSE: "Close",
    HEARTBEAT: "Heartbeat",
    ROUTE: "Route",
    PARTITIONS: "Partitions",
    CONSUMER_UPDATE: "ConsumerUpdate",
    EXCHANGE_COMMAND_VERSIONS: "ExchangeCommandVersions",
    STREAM_STATS: "StreamStats",
    CREATE_SUPER_STREAM: "CreateSuperStream",
    DELETE_SUPER_STREAM: "DeleteSuperStream",
    RESOLVE_OFFSET_SPEC: "ResolveOffsetSpec",
}

# response codes
OK: Final = 0x01
STREAM_DOES_NOT_EXIST: Final = 0x02
SUBSCRIPTION_ID_ALREADY_EXISTS: Final = 0x03
SUBSCRIPTION_ID_DOES_NOT_EXIST: Final = 0x04
STREAM_ALREADY_EXISTS: Final = 0x05
STREAM_NOT_AVAILABLE: Final = 0x06
SASL_MECHANISM_NOT_SUPPORTED: Final = 0x07
AUTHENTICATION_FAILURE: Final = 0x08
SASL_ERROR: Final = 0x09
SASL_CHALLENGE: Final = 0x0A
SASL_AUTHENTICATION_FAILURE_LOOPBACK: Final = 0x0B
VIRTUAL_HOST_ACCESS_FAILURE: Final = 0x0C
UNKNOWN_FRAME: Final = 0x0D
FRAME_TOO_LARGE: Final = 0x0E
INTERNAL_ERROR: Final = 0x0F
ACCESS_REFUSED: Final = 0x10
PRECONDITION_FAILED: Final = 0x11
PUBLISHER_DOES_NOT_EXIST: Final = 0x12
NO_OFFSET: Final = 0x13
SASL_CANNOT_CHANGE_MECHANISM: Final = 0x14  # rabbit_stream.hrl, not yet in PROTOCOL.adoc
SASL_CANNOT_CHANGE_USERNAME: Final = 0x15

RESPONSE_NAMES: Final = {
    OK: "OK",
    STREAM_DOES_NOT_EXIST: "Stream does not exist",
    SUBSCRIPTION_ID_ALREADY_EXISTS: "Subscription ID already exists",
    SUBSCRIPTION_ID_DOES_NOT_EXIST: "Subscription ID does not exist",
    STREAM_ALREADY_EXISTS: "Stream already exists",
    STREAM_NOT_AVAILABLE: "Stream not available",
    SASL_MECHANISM_NOT_SUPPORTED: "SASL mechanism not supported",
    AUTHENTICATION_FAILURE: "Authentication failure",
    SASL_ERROR: "SASL error",
    SASL_CHALLENGE: "SASL challenge",
    SASL_AUTHENTICATION_FAILURE_LOOPBACK: "SASL authentication failure loopback",
    VIRTUAL_HOST_ACCESS_FAILURE: "Virtual host access failure",
    UNKNOWN_FRAME: "Unknown frame",
    FRAME_TOO_LARGE: "Frame too large",
    INTERNAL_ERROR: "Internal error",
    ACCESS_REFUSED: "Access refused",
    PRECONDITION_FAILED: "Precondition failed",
    PUBLISHER_DOES_NOT_EXIST: "Publisher does not exist",
    NO_OFFSET: "No offset",
    SASL_CANNOT_CHANGE_MECHANISM: "SASL cannot change mechanism",
    SASL_CANNOT_CHANGE_USERNAME: "SASL cannot change username",
}


def response_name(code: int) -> str:
    return RESPONSE_NAMES.get(code, f"response code 0x{code:02X}")


# offset specification types (Subscribe, ConsumerUpdate's answer, ResolveOffsetSpec)
OFFSET_NONE: Final = 0  # only in a ConsumerUpdate answer: "use the subscription's"
OFFSET_FIRST: Final = 1
OFFSET_LAST: Final = 2
OFFSET_NEXT: Final = 3
OFFSET_OFFSET: Final = 4
OFFSET_TIMESTAMP: Final = 5

# defaults and limits RabbitMQ uses (rabbit_stream.hrl, rabbit_stream_reader.erl)
DEFAULT_FRAME_MAX: Final = 1_048_576
DEFAULT_INITIAL_FRAME_MAX: Final = 8_192  # until Open succeeds
DEFAULT_HEARTBEAT: Final = 60
MAX_REFERENCE_LENGTH: Final = 256  # publisher and offset-tracking references
MAX_PUBLISHERS_PER_CONNECTION: Final = 256
MAX_SUBSCRIPTIONS_PER_CONNECTION: Final = 256

# chunks (osiris): magic 5 in the high nibble, chunk format version 0 in the low one
CHUNK_MAGIC_VERSION: Final = 0x50
CHUNK_HEADER_SIZE: Final = 48
CHUNK_USER: Final = 0
CHUNK_TRACKING_DELTA: Final = 1
CHUNK_TRACKING_SNAPSHOT: Final = 2
# sub-batch compression types (the three bits after an entry's high bit)
COMPRESSION_NONE: Final = 0
COMPRESSION_GZIP: Final = 1
COMPRESSION_SNAPPY: Final = 2
COMPRESSION_LZ4: Final = 3
COMPRESSION_ZSTD: Final = 4
