"""Where each vhost's queues and streams keep their files under the data directory.

Names are hashed into directory names: queue and vhost names may hold any UTF-8 (``/``,
``..``, very long names), which must never become path components. The real name lives in
the files' own metadata.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def name_hash(name: str) -> str:
    return hashlib.sha1(name.encode("utf-8")).hexdigest()


def vhost_dir(data_dir: Path, vhost: str) -> Path:
    return data_dir / "vhosts" / name_hash(vhost)


def queue_dir(data_dir: Path, vhost: str, queue: str) -> Path:
    return vhost_dir(data_dir, vhost) / "queues" / name_hash(queue)


def stream_dir(data_dir: Path, vhost: str, stream: str) -> Path:
    return vhost_dir(data_dir, vhost) / "streams" / name_hash(stream)


def delayed_dir(data_dir: Path, vhost: str, exchange: str) -> Path:
    """An x-delayed-message exchange's held messages."""
    return vhost_dir(data_dir, vhost) / "delayed" / name_hash(exchange)
