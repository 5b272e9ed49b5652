"""Start Roost or RabbitMQ on free loopback ports with everything in a temp dir.

Each launcher is a context manager yielding an AMQP URL; leaving it stops the broker
and removes its files. Nothing listens on anything but 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")  # the real scripts; /usr/sbin's wrappers su away


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}:\n{_tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"broker not listening on {port} after {timeout:g} s:\n{_tail(log)}")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _roost_command() -> list[str]:
    exe = Path(sys.executable).parent / "roost"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "roost"]


@contextlib.contextmanager
def roost(
    *extra: str,
    timeout: float = 30.0,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> Iterator[str]:
    """``roost server`` on a free port (``env`` added to its environment; ``command``: the
    ``roost`` to run, this interpreter's by default); yields its URL."""
    with tempfile.TemporaryDirectory(prefix="bench-roost-") as tmp:
        port = free_port()
        log = Path(tmp) / "server.log"
        # --http-port 0 (and STOMP's ports): not measured here, and their default ports may
        # be taken (another broker, another bench run), which would stop the server at start.
        cmd = [*(command or _roost_command()), "server", "--amqp-port", str(port),
               "--http-port", "0",
               "--stomp-port", "0", "--ws-port", "0", "--prometheus-port", "0",
               "--mqtt-port", "0", "--mqtt-ws-port", "0", "--stream-port", "0",
               "--data-dir", str(Path(tmp) / "data"), "--log-level", "warning", *extra]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=tmp,
                                    env={**os.environ, **env} if env else None)
        try:
            _wait_for_port(port, proc, timeout, log)
            yield f"amqp://guest:guest@127.0.0.1:{port}/%2F"
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def rabbitmq_installed() -> bool:
    return (RABBITMQ_BIN / "rabbitmq-server").exists() and shutil.which("erl") is not None


def _epmd_running() -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", 4369), 0.5):
        return True
    return False


def rabbitmq_env(
    base: Path,
    node: str,
    port: int,
    dist: int,
    extra_conf: str = "",
    plugins: tuple[str, ...] = (),
    home: Path | None = None,
) -> dict[str, str]:
    """The environment of one throwaway RabbitMQ node with its files under ``base``
    (``home``: where the Erlang cookie lives; nodes of one cluster share it)."""
    home = home or base / "home"
    home.mkdir(parents=True, exist_ok=True)
    base.mkdir(parents=True, exist_ok=True)
    (base / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{port}\n"
        "loopback_users = none\n" + extra_conf
    )
    (base / "enabled_plugins").write_text(f"[{','.join(plugins)}].\n")
    return {
        **os.environ,
        "HOME": str(home),  # the Erlang cookie lives here
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
        "ERL_EPMD_ADDRESS": "127.0.0.1",
    }


@contextlib.contextmanager
def rabbitmq(
    timeout: float = 90.0, plugins: tuple[str, ...] = (), extra_conf: str = "",
    name: str = "bench",
) -> Iterator[str]:
    """A throwaway RabbitMQ node (no plugins unless asked) on free ports; yields its URL.
    ``extra_conf`` lines are appended to rabbitmq.conf (a plugin's listener port);
    ``name`` tells two nodes of one run apart."""
    if not rabbitmq_installed():
        raise RuntimeError("rabbitmq-server is not installed")
    with tempfile.TemporaryDirectory(prefix="bench-rabbitmq-") as tmp:
        base = Path(tmp)
        port, dist = free_port(), free_port()
        node = f"{name}-{os.getpid()}@localhost"
        env = rabbitmq_env(base, node, port, dist, extra_conf, plugins)
        epmd_was_running = _epmd_running()
        log = base / "server.log"
        ctl = [str(RABBITMQ_BIN / "rabbitmqctl"), "-n", node]
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(RABBITMQ_BIN / "rabbitmq-server")], env=env,
                                    stdout=out, stderr=subprocess.STDOUT, cwd=tmp)
        try:
            # ``wait`` on the pid file blocks until the node has booted (await_startup
            # fails outright if the node has not registered with epmd yet).
            subprocess.run([*ctl, "wait", env["RABBITMQ_PID_FILE"], "--timeout", str(int(timeout))],
                           env=env, check=True, capture_output=True, timeout=timeout + 10)
            _wait_for_port(port, proc, 10, log)
            yield f"amqp://guest:guest@127.0.0.1:{port}/%2F"
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"RabbitMQ did not start: {exc.stderr!r}\n{_tail(log)}") from None
        finally:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run([*ctl, "stop"], env=env, capture_output=True, timeout=60)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if not epmd_was_running:
                # We started epmd (Erlang does on first use); leave no daemon behind.
                subprocess.run(["epmd", "-kill"], env=env, capture_output=True, check=False)


@contextlib.contextmanager
def roost_pure() -> Iterator[str]:
    """Roost's pure-Python build beside the compiled one: the same checkout with
    ``ROOST_PURE_PYTHON=1`` (docs/compiled.md); only the server runs pure."""
    with roost(env={"ROOST_PURE_PYTHON": "1"}) as url:
        yield url


LAUNCHERS = {"roost": roost, "roost-pure": roost_pure, "rabbitmq": rabbitmq}
TITLES = {"roost": "Roost", "roost-pure": "Roost (pure)", "rabbitmq": "RabbitMQ"}  # headings
