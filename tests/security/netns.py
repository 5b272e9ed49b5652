"""A second host for tests: a network namespace joined to this one by a veth pair.

Tests that need a client that is not on loopback (the guest rule) or a link that can be
cut under a live connection (TCP keepalive) run that client inside the namespace with
``ip netns exec``. Names and the /30 subnet derive from the pid, so parallel test runs on
one machine do not collide. Needs root and iproute2; ``PeerHost.create`` skips the test
otherwise. Traffic stays on this machine: the namespace's only link is the veth pair.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import prerequisite

ROOT = Path(__file__).resolve().parents[2]
CLIENT = "tests.security.netns_client"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


class PeerHost:
    def __init__(self, index: int) -> None:
        key = (os.getpid() * 8 + index) % 16000
        self.netns = f"roost{os.getpid()}n{index}"
        self.host_if = f"rh{key}"  # interface names: 15 characters at most
        self.peer_if = f"rp{key}"
        base = 4 * key  # a /30 inside 10.213.0.0/16
        prefix = f"10.213.{base >> 8}."
        self.host_ip = prefix + str((base & 255) + 1)
        self.peer_ip = prefix + str((base & 255) + 2)

    @classmethod
    @contextmanager
    def create(cls, index: int = 0) -> Iterator[PeerHost]:
        if os.geteuid() != 0 or shutil.which("ip") is None:
            prerequisite("network namespaces need root and iproute2")
        peer = cls(index)
        made = _ip("netns", "add", peer.netns, check=False)
        if made.returncode != 0:
            prerequisite(f"cannot create a network namespace: {made.stderr.strip()}")
        try:
            _ip("link", "add", peer.host_if, "type", "veth", "peer", "name", peer.peer_if)
            _ip("link", "set", peer.peer_if, "netns", peer.netns)
            _ip("addr", "add", f"{peer.host_ip}/30", "dev", peer.host_if)
            _ip("link", "set", peer.host_if, "up")
            peer.inside("addr", "add", f"{peer.peer_ip}/30", "dev", peer.peer_if)
            peer.inside("link", "set", peer.peer_if, "up")
            peer.inside("link", "set", "lo", "up")
            yield peer
        finally:
            _ip("netns", "del", peer.netns, check=False)  # takes the veth pair with it
            _ip("link", "del", peer.host_if, check=False)

    def inside(self, *args: str) -> None:
        _ip("netns", "exec", self.netns, "ip", *args)

    def cut(self) -> None:
        """Take the peer's end of the link down: its packets stop, nothing is closed."""
        self.inside("link", "set", self.peer_if, "down")

    def client(self, *args: str) -> subprocess.Popen[str]:
        """``tests/security/netns_client.py`` inside the namespace; its stdin keeps it
        alive (close it to end the client)."""
        return subprocess.Popen(
            ["ip", "netns", "exec", self.netns, sys.executable, "-m", CLIENT, *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
