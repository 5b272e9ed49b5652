"""``roost perf``: a PerfTest-compatible load generator for AMQP 0-9-1 brokers, and for
STOMP over TCP and WebSocket.

It is a client: it speaks the wire protocols through ``roost.client`` and the STOMP
codec, and never imports the broker. Each producer and consumer is its own process with
its own event loop and connection, so the tool scales with cores instead of one GIL.
"""
