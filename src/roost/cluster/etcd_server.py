"""Start a local single-member etcd (``roost cluster up``, the tests): loopback ports, a
data directory of its own, its output in ``etcd.log`` there."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

ETCD_BINARY = "etcd"  # Debian's etcd-server package puts it at /usr/bin/etcd


def find_etcd() -> str | None:
    return shutil.which(ETCD_BINARY) or (
        "/usr/bin/etcd" if Path("/usr/bin/etcd").exists() else None
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class EtcdServer:
    """One etcd member on ``host``; ``client_port`` 0 picks a free port at first start and
    keeps it across restarts (clients reconnect to the same address)."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", client_port: int = 0) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.client_port = client_port
        self.peer_port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.client_port}"

    def url(self, prefix: str = "") -> str:
        """The ``--cluster`` value for Roost nodes (``prefix``: a key prefix of their own)."""
        return f"etcd://{self.endpoint}{prefix}"

    def start(self, timeout: float = 20.0) -> EtcdServer:
        binary = find_etcd()
        if binary is None:
            raise FileNotFoundError("etcd is not installed (Debian: apt-get install etcd-server)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.client_port = self.client_port or free_port(self.host)
            self.peer_port = self.peer_port or free_port(self.host)
            client = f"http://{self.host}:{self.client_port}"
            peer = f"http://{self.host}:{self.peer_port}"
            log = (self.data_dir / "etcd.log").open("ab")
            self.proc = subprocess.Popen(
                [
                    binary,
                    "--name",
                    "roost-etcd",
                    "--data-dir",
                    str(self.data_dir / "member-data"),
                    "--listen-client-urls",
                    client,
                    "--advertise-client-urls",
                    client,
                    "--listen-peer-urls",
                    peer,
                    "--initial-advertise-peer-urls",
                    peer,
                    "--initial-cluster",
                    f"roost-etcd={peer}",
                    # keep history of a day's changes: a node that was away resumes its watch
                    "--auto-compaction-mode",
                    "periodic",
                    "--auto-compaction-retention",
                    "24h",
                    "--logger",
                    "zap",
                    "--log-level",
                    "warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
            if self._wait_ready(timeout):
                return self
            self.kill()
            self.client_port = self.peer_port = 0
        raise RuntimeError(f"etcd did not start: see {self.data_dir / 'etcd.log'}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection((self.host, self.client_port), timeout=0.2):
                    pass
            except OSError:
                time.sleep(0.05)
                continue
            if self._healthy():
                return True
            time.sleep(0.05)
        return False

    def _healthy(self) -> bool:
        import json
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=1) as r:
                return bool(json.load(r).get("health") == "true")
        except (OSError, ValueError):
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self, *, kill: bool = True) -> EtcdServer:
        self.kill() if kill else self.stop()
        return self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
