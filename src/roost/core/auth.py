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
SHA512 = "rabbit_password_hashing_sha512"
MD5 = "rabbit_password_hashing_md5"
# RabbitMQ's hashing modules, each base64(salt + digest(salt + password)), 4-byte salt
SUPPORTED_HASHES = {SHA256: hashlib.sha256, SHA512: hashlib.sha512, MD5: hashlib.md5}


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    salt = os.urandom(4) if salt is None else salt
    digest = hashlib.sha256(salt + password.encode("utf-8")).digest()
    return base64.b64encode(salt + digest).decode("ascii")


def check_password(password_hash: str, password: str, algorithm: str = SHA256) -> bool:
    digest_of = SUPPORTED_HASHES.get(algorithm)
    if digest_of is None:
        return False
    try:
        raw = base64.b64decode(password_hash, validate=True)
    except ValueError:
        return False
    salt, digest = raw[:4], raw[4:]
    return hmac.compare_digest(digest, digest_of(salt + password.encode("utf-8")).digest())


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


@dataclass
class TopicPermission:
    """write / read patterns for routing keys on one topic exchange (RabbitMQ's topic
    authorisation). Stored, exported and shown; not yet enforced on publish."""

    exchange: str
    write: str = ".*"
    read: str = ".*"
