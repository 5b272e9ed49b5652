"""The node-to-node link: a sans-IO codec (frames.py, codec.py) and its asyncio
transport (transport.py), one TCP connection per pair of nodes."""
