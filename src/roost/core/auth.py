"""Users, password hashes and per-vhost permissions.

Hashes use RabbitMQ's ``rabbit_password_hashing_sha256`` layout, base64(salt + sha256(salt +
password)) with a 4-byte salt, so users exported from RabbitMQ import unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass, field

SHA256 = "rabbit_password_hashing_sha256"


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    salt = os.urandom(4) if salt is None else salt
    digest = hashlib.sha256(salt + password.encode("utf-8")).digest()
    return base64.b64encode(salt + digest).decode("ascii")


def check_password(password_hash: str, password: str, algorithm: str = SHA256) -> bool:
    if algorithm != SHA256:
        return False
    try:
        raw = base64.b64decode(password_hash, validate=True)
    except ValueError:
        return False
    salt, digest = raw[:4], raw[4:]
    return hmac.compare_digest(digest, hashlib.sha256(salt + password.encode("utf-8")).digest())


@dataclass
class User:
    name: str
    password_hash: str
    tags: list[str] = field(default_factory=list)
    hashing_algorithm: str = SHA256

    def check(self, password: str) -> bool:
        return bool(self.password_hash) and check_password(
            self.password_hash, password, self.hashing_algorithm
        )


@dataclass
class Permission:
    """configure / write / read regular expressions, matched as RabbitMQ does (unanchored;
    the empty string grants nothing)."""

    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"

    def allows(self, kind: str, resource: str) -> bool:
        pattern = getattr(self, kind)
        return bool(pattern) and re.search(pattern, resource) is not None
