"""The users file: extra users, vhosts and permissions, with hashed passwords only.

```toml
vhosts = ["/", "orders"]

[[users]]
name = "alice"
password_hash = "..."            # roost users hash-password SECRET
tags = ["administrator"]
permissions = { "/" = { configure = ".*", write = ".*", read = ".*" } }
```
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from roost.core.auth import Permission
from roost.core.broker import Broker


def load_users_file(broker: Broker, path: str) -> None:
    with Path(path).open("rb") as fh:
        data = tomllib.load(fh)
    for vhost in data.get("vhosts", []):
        broker.add_vhost(vhost)
    for entry in data.get("users", []):
        if "password" in entry:
            raise ValueError(
                f"{path}: user {entry.get('name')!r} has a plaintext password; store "
                "password_hash instead (roost users hash-password)"
            )
        broker.add_user(entry["name"], entry.get("password_hash", ""), tags=entry.get("tags"))
        for vhost, perm in entry.get("permissions", {}).items():
            broker.add_vhost(vhost)
            broker.set_permission(entry["name"], vhost, Permission(**perm))
