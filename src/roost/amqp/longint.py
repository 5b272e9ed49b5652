"""``Long``: an int the AMQP codec always writes as a 64-bit 'l' field value.

Its own module because the codec is compiled with mypyc (docs/compiled.md), and mypyc
cannot compile a subclass of ``int``: this module stays interpreted in both builds.
"""

from __future__ import annotations


class Long(int):
    """An integer sent as a 64-bit 'l' field whatever its size: RabbitMQ types the
    counts it writes (x-death ``count``, ``x-delivery-count``) so, and typed clients
    (Java's, .NET's) read them back as such."""
