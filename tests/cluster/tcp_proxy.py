"""A TCP forwarder in a process of its own, to put between one node and etcd: the test
stops it (SIGSTOP) to cut that node off from etcd and only that node, with nothing
closed (its requests hang, as across a partition), and continues it (SIGCONT) to heal.

Run as ``python tcp_proxy.py TARGET_HOST TARGET_PORT``; it prints the port it listens
on (loopback, picked by the kernel) on its first line.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


async def _main(host: str, port: int) -> None:
    async def forward(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(host, port)
        except OSError:
            w.close()
            return
        await asyncio.gather(_pipe(r, uw), _pipe(ur, w))

    server = await asyncio.start_server(forward, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


class Proxy:
    """The forwarder's process (``port``: where to connect instead of the target)."""

    def __init__(self, host: str, port: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), host, str(port)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], int(sys.argv[2])))
