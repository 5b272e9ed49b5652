"""Users, password hashes and per-vhost permissions.

Hashes use RabbitMQ's ``rabbit_password_hashing_sha256`` layout, base64(salt + sha256(salt +
password)) with a 4-byte salt, so users exported from RabbitMQ import unchanged. bcrypt
hashes are accepted too, stored as dispatchd's ``password_bcrypt_base64`` writes them:
base64 of the ``$2a$…`` string. No plaintext password is ever kept.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from dataclasses import dataclass, field

import bcrypt

SHA256 = "rabbit_password_hashing_sha256"
SHA512 = "rabbit_password_hashing_sha512"
MD5 = "rabbit_password_hashing_md5"
# RabbitMQ's hashing modules, each base64(salt + digest(salt + password)), 4-byte salt
SUPPORTED_HASHES = {SHA256: hashlib.sha256, SHA512: hashlib.sha512, MD5: hashlib.md5}
BCRYPT = "bcrypt"  # password_hash = base64 of the bcrypt string (dispatchd's format)
ALGORITHMS = frozenset((*SUPPORTED_HASHES, BCRYPT))

# bcrypt costs ~0.1 s a check by design, and the HTTP API authenticates every request:
# remember (keyed with a per-process secret, never the password itself) which
# hash/password pairs were right, as RabbitMQ's auth cache does.
_MEMO_KEY = os.urandom(32)
_verified: set[bytes] = set()
_MEMO_MAX = 4096


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    salt = os.urandom(4) if salt is None else salt
    digest = hashlib.sha256(salt + password.encode("utf-8")).digest()
    return base64.b64encode(salt + digest).decode("ascii")


def is_bcrypt_base64(password_hash: str) -> bool:
    """True when the text is base64 of a ``$2a$``/``$2b$``/``$2y$`` bcrypt string."""
    try:
        raw = base64.b64decode(password_hash, validate=True)
    except (ValueError, binascii.Error):
        return False
    return raw[:4] in (b"$2a$", b"$2b$", b"$2y$") and len(raw) == 60


def check_bcrypt(password_hash: str, password: str) -> bool:
    secret = password.encode("utf-8")
    memo = hmac.digest(_MEMO_KEY, password_hash.encode("ascii") + b"\0" + secret, "sha256")
    if memo in _verified:
        return True
    try:
        raw = base64.b64decode(password_hash, validate=True)
        ok = bcrypt.checkpw(secret, raw)
    except (ValueError, binascii.Error):
        return False
    if ok:
        if len(_verified) >= _MEMO_MAX:
            _verified.clear()
        _verified.add(memo)
    return ok


def check_password(password_hash: str, password: str, algorithm: str = SHA256) -> bool:
    if algorithm == BCRYPT:
        return check_bcrypt(password_hash, password)
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
    authorisation), enforced by core/access.py."""

    exchange: str
    write: str = ".*"
    read: str = ".*"
