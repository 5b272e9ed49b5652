"""Cluster nodes on separate "hosts": each node in a network namespace of its own, joined
by veth pairs to one bridge in this namespace, which holds etcd's address and the
clients' (two addresses, so a node can lose etcd and keep its clients, or the reverse).

A partition is a blackhole route inside a node's namespace (iproute2 only, no
iptables): its packets to the addresses named stop, nothing is closed, and every other
path keeps working. Names and the subnet derive from the pid, so parallel runs on one
machine do not collide; everything stays on this machine. Needs root and iproute2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import RoostProcess, prerequisite


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class NetnsNode(RoostProcess):
    """``roost server`` inside namespace ``netns``, listening on ``address`` only."""

    def __init__(self, data_dir: Path, netns: str, address: str, *extra: str) -> None:
        super().__init__(data_dir, *extra, "--bind", address, "--loopback-users", "")
        self.address = address
        data_dir.mkdir(parents=True, exist_ok=True)
        wrapper = data_dir.parent / f"{data_dir.name}-python"
        wrapper.write_text(f'#!/bin/sh\nexec ip netns exec {netns} {sys.executable} "$@"\n')
        wrapper.chmod(0o755)
        self.python = str(wrapper)  # ``ip netns exec`` execs: the pid is the server's

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{self.address}:{self.amqp_port}/%2F"

    @property
    def http_url(self) -> str:
        return f"http://{self.address}:{self.http_port}"


class Subnet:
    def __init__(self, count: int) -> None:
        pid = os.getpid()
        self.bridge = f"qb{pid}"[:15]
        prefix = f"10.{100 + pid // 250 % 100}.{pid % 250 + 1}."  # not tests/security's
        self.client_ip = prefix + "1"
        self.etcd_ip = prefix + "2"
        self.netns = [f"roostq{os.getpid()}n{i}" for i in range(count)]
        self.ips = [prefix + str(10 + i) for i in range(count)]
        self._ends = [f"qh{os.getpid()}{i}"[:15] for i in range(count)]

    @classmethod
    @contextmanager
    def create(cls, count: int = 3) -> Iterator[Subnet]:
        if os.geteuid() != 0 or shutil.which("ip") is None:
            prerequisite("network namespaces need root and iproute2")
        net = cls(count)
        made = _ip("link", "add", net.bridge, "type", "bridge", check=False)
        if made.returncode != 0:
            prerequisite(f"cannot create a bridge: {made.stderr.strip()}")
        try:
            _ip("addr", "add", f"{net.client_ip}/24", "dev", net.bridge)
            _ip("addr", "add", f"{net.etcd_ip}/24", "dev", net.bridge)
            _ip("link", "set", net.bridge, "up")
            for ns, end, ip in zip(net.netns, net._ends, net.ips, strict=True):
                _ip("netns", "add", ns)
                _ip("link", "add", end, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("link", "set", end, "master", net.bridge)
                _ip("link", "set", end, "up")
                _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
            yield net
        finally:
            for ns, end in zip(net.netns, net._ends, strict=True):
                _ip("netns", "del", ns, check=False)
                _ip("link", "del", end, check=False)
            _ip("link", "del", net.bridge, check=False)

    def node(self, k: int, data_dir: Path, *extra: str) -> NetnsNode:
        return NetnsNode(data_dir, self.netns[k], self.ips[k], *extra)

    def cut(self, k: int, *addresses: str) -> None:
        """Node ``k`` stops reaching ``addresses`` (and so hears nothing back from them)."""
        for address in addresses:
            _ip("-n", self.netns[k], "route", "add", "blackhole", f"{address}/32")

    def heal(self, k: int, *addresses: str) -> None:
        for address in addresses:
            _ip("-n", self.netns[k], "route", "del", "blackhole", f"{address}/32")
