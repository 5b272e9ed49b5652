"""The management HTTP API, web UI and Prometheus metrics (aiohttp)."""
