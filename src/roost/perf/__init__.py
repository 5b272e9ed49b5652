"""``roost perf``: a PerfTest-like load generator for any AMQP 0-9-1 broker.

It is a client: it speaks the wire protocol through ``roost.amqp.codec`` and never
imports the broker. Each producer and consumer is its own process with its own
event loop and connection, so the tool scales with cores instead of one GIL.
"""
