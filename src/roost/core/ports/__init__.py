"""The core's two faces: the adapter port (protocol connections) and the management
port (HTTP API, web UI, metrics, ``roost ctl``). See docs/architecture.md."""
