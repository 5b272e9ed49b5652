"""AMQP 0-9-1: the sans-IO codec (``codec``, generated ``codec_methods``, ``errors``) and the
server side (connection and channel state machines, asyncio protocol)."""
