"""The users file: extra users, vhosts and permissions, with hashed passwords only.

```toml
vhosts = ["/", "orders"]

[[users]]
name = "alice"
password_hash = "..."            # roost users hash-password SECRET
# or password_bcrypt_base64 = "..." (a dispatchd user: base64 of a bcrypt hash)
tags = ["administrator"]
permissions = { "/" = { configure = ".*", write = ".*", read = ".*" } }
```
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from roost.core.auth import BCRYPT, Permission
from roost.core.broker import Broker


def load_users_file(broker: Broker, path: str) -> None:
    with Path(path).open("rb") as fh:
        data = tomllib.load(fh)
    for vhost in data.get("vhosts", []):
        broker.catalog.add_vhost(vhost)
    for entry in data.get("users", []):
        if "password" in entry:
            raise ValueError(
                f"{path}: user {entry.get('name')!r} has a plaintext password; store "
                "password_hash instead (roost users hash-password)"
            )
        bcrypt_hash = entry.get("password_bcrypt_base64")
        if bcrypt_hash is not None:  # dispatchd's users: base64 of a bcrypt hash
            broker.catalog.put_user(
                entry["name"],
                password_hash=bcrypt_hash,
                hashing_algorithm=BCRYPT,
                tags=entry.get("tags"),
            )
        else:
            broker.catalog.add_user(
                entry["name"], entry.get("password_hash", ""), tags=entry.get("tags")
            )
        for vhost, perm in entry.get("permissions", {}).items():
            broker.catalog.add_vhost(vhost)
            broker.catalog.set_permission(entry["name"], vhost, Permission(**perm))
