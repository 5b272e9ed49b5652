"""The ``--cluster`` URL (no I/O, no etcd client: config validation imports it)."""

from __future__ import annotations


def parse_cluster_url(url: str) -> tuple[list[tuple[str, int]], str]:
    """``etcd://HOST:PORT[,HOST:PORT…][/PREFIX]`` as endpoints and a key prefix (default
    ``/roost``: several clusters can share one etcd under different prefixes)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme != "etcd":
        raise ValueError(f"cluster must be etcd://HOST:PORT[,HOST:PORT…], not {url!r}")
    hosts, slash, path = rest.partition("/")
    endpoints = []
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"cluster endpoint {item!r} is not HOST:PORT")
        endpoints.append((host.strip("[]"), int(port)))
    prefix = "/" + path.strip("/") if slash and path.strip("/") else "/roost"
    return endpoints, prefix
