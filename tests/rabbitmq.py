"""A throwaway RabbitMQ node for interop tests: Debian's rabbitmq-server (3.10), started
from its real scripts on free loopback ports, with a node name of its own and every file
in a temp dir; optionally an AMQPS listener. ``ctl(...)`` runs rabbitmqctl against it.

``./scripts/test`` installs rabbitmq-server where it is missing (scripts/_system.sh); a
test that needs it fails there when it is absent (``prerequisite``), and skips elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

from tests.support import free_port, prerequisite

RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")  # the real scripts; /usr/sbin's wrappers su away


def installed() -> bool:
    return (RABBITMQ_BIN / "rabbitmq-server").exists() and shutil.which("erl") is not None


class RabbitMQ:
    def __init__(self, base: Path, *, tls: tuple[Path, Path, Path] | None = None) -> None:
        """``tls``: (CA file, certificate, key) for an AMQPS listener."""
        if not installed():
            prerequisite("rabbitmq-server is not installed")
        self.base = base
        self.port, self.dist = free_port(), free_port()
        self.amqps_port = free_port() if tls else 0
        self.node = f"roost-test-{uuid.uuid4().hex[:8]}@localhost"
        (base / "home").mkdir(parents=True)
        conf = [f"listeners.tcp.default = 127.0.0.1:{self.port}", "loopback_users = none"]
        plugins = []
        if tls:  # client certificates are verified when sent, and name an EXTERNAL user
            ca, cert, key = tls
            conf += [f"listeners.ssl.default = 127.0.0.1:{self.amqps_port}",
                     f"ssl_options.cacertfile = {ca}", f"ssl_options.certfile = {cert}",
                     f"ssl_options.keyfile = {key}", "ssl_options.verify = verify_peer",
                     "ssl_options.fail_if_no_peer_cert = false",
                     "ssl_cert_login_from = common_name", "auth_mechanisms.1 = PLAIN",
                     "auth_mechanisms.2 = AMQPLAIN", "auth_mechanisms.3 = EXTERNAL"]
            plugins.append("rabbitmq_auth_mechanism_ssl")
        (base / "rabbitmq.conf").write_text("\n".join(conf) + "\n")
        (base / "enabled_plugins").write_text(f"[{','.join(plugins)}].\n")
        self.env = {
            **os.environ,
            "HOME": str(base / "home"),  # the Erlang cookie lives here
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self._epmd_was_running = False

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def start(self, timeout: float = 90.0) -> RabbitMQ:
        self._epmd_was_running = _listening(4369)
        with open(self.base / "server.log", "wb") as out:
            self.proc = subprocess.Popen([str(RABBITMQ_BIN / "rabbitmq-server")], env=self.env,
                                         stdout=out, stderr=subprocess.STDOUT, cwd=self.base)
        try:  # ``wait`` on the pid file blocks until the node has booted
            self.ctl("wait", self.env["RABBITMQ_PID_FILE"], "--timeout", str(int(timeout)),
                     timeout=timeout + 10)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            self.stop()
            raise RuntimeError(f"RabbitMQ did not start: {exc}\n{self.log()}") from None
        deadline = time.monotonic() + 10
        while not _listening(self.port):
            assert time.monotonic() < deadline, f"RabbitMQ not listening:\n{self.log()}"
            time.sleep(0.1)
        return self

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """rabbitmqctl against this node; its stdout."""
        done = subprocess.run([str(RABBITMQ_BIN / "rabbitmqctl"), "-n", self.node, *args],
                              env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=True)
        return done.stdout

    def log(self) -> str:
        text = (self.base / "server.log").read_text(errors="replace") if (
            self.base / "server.log").exists() else ""
        return "\n".join(text.splitlines()[-30:])

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self.ctl("stop", timeout=60)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if not self._epmd_was_running:  # Erlang started epmd: leave no daemon behind,
            # unless another node (someone else's) registered with it since
            names = subprocess.run(["epmd", "-names"], env=self.env, capture_output=True,
                                   text=True, check=False).stdout
            if "at port" not in names:
                subprocess.run(["epmd", "-kill"], env=self.env, capture_output=True,
                               check=False)


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False
