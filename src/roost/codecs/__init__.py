"""Codecs shared by the store and the protocol adapters (stdlib only, no I/O)."""
