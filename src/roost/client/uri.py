"""AMQP URIs as RabbitMQ's URI specification and its query parameters define them.

``amqp[s]://[user[:password]@][host][:port][/vhost][?key=value&...]``:

- every part is percent-decoded; an absent part takes the default, an empty one is
  empty: ``amqp://host`` is vhost ``/``, but ``amqp://host/`` is the vhost ``""``
  (the specification's own example) and ``amqp://host/%2F`` is ``/``. A vhost with an
  unencoded ``/`` (``amqp://host/a/b``) is refused, as RabbitMQ's Erlang client does;
- ``amqps`` means TLS, port 5671 unless given (``amqp``: 5672); an absent host is kept
  as ``""`` (a shovel may read it as "this broker"); ``address`` then says localhost;
- query parameters (the Erlang client's, which RabbitMQ's shovels and federation
  take): ``heartbeat`` (s), ``connection_timeout`` (ms), ``channel_max``, ``frame_max``,
  ``auth_mechanism`` (repeatable: ``plain``, ``amqplain``, ``external``), and for
  ``amqps`` ``cacertfile``, ``certfile``, ``keyfile``, ``password`` (of the key),
  ``verify`` (``verify_peer``, the default here, or ``verify_none``) and
  ``server_name_indication`` (a host name, or ``disable``). ``depth`` and
  ``fail_if_no_peer_cert`` are accepted and ignored (Python's ``ssl`` has no chain
  depth; the other is a server setting). Anything else is refused: a typo in a
  parameter must not silently connect with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, unquote

DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
DEFAULT_TIMEOUT_S = 30.0
_IGNORED = frozenset({"depth", "fail_if_no_peer_cert"})
_TLS_KEYS = frozenset(
    {"cacertfile", "certfile", "keyfile", "password", "verify", "server_name_indication"}
)
_MECHANISMS = {"plain": "PLAIN", "amqplain": "AMQPLAIN", "external": "EXTERNAL"}


@dataclass(frozen=True)
class Endpoint:
    """Where and how to connect; frozen and picklable (it crosses process boundaries)."""

    host: str = ""  # "" = not given: connect to localhost
    port: int = 5672
    user: str = "guest"
    password: str = field(default="guest", repr=False)
    vhost: str = "/"
    tls: bool = False
    heartbeat: int | None = None  # seconds; None = not given (the caller's default)
    frame_max: int | None = None  # None = not given (131072 asked for)
    channel_max: int | None = None  # None = not given (2047 asked for, as RabbitMQ)
    connection_timeout: float = DEFAULT_TIMEOUT_S  # seconds, for TCP + TLS + handshake
    mechanisms: tuple[str, ...] = ("PLAIN", "AMQPLAIN")  # in order of preference
    cacertfile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = field(default=None, repr=False)
    verify: bool = True
    server_name: str | None = None  # TLS SNI and name checked; None = the host; "" = none

    @property
    def address(self) -> tuple[str, int]:
        return (self.host or "localhost", self.port)

    def __str__(self) -> str:
        """The URI without the password, for messages and logs."""
        scheme = "amqps" if self.tls else "amqp"
        host = f"[{self.host}]" if ":" in self.host else self.host
        vhost = self.vhost.replace("%", "%25").replace("/", "%2F")
        return f"{scheme}://{self.user}@{host}:{self.port}/{vhost}"


def parse_uri(uri: str) -> Endpoint:
    """One URI; raises ``ValueError`` saying what is wrong (without the password)."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() not in DEFAULT_PORTS:
        raise ValueError(f"not an amqp:// or amqps:// URI: {_masked(uri)}")
    tls = scheme.lower() == "amqps"
    rest, _, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    if "/" in path:
        raise ValueError(f"the vhost's '/' must be written %2F: {_masked(uri)}")
    userinfo, at, hostport = authority.rpartition("@")
    user, password = "guest", "guest"
    if at:
        name, colon, secret = userinfo.partition(":")
        user = unquote(name)
        if colon:
            password = unquote(secret)
    host, port = _host_port(hostport, DEFAULT_PORTS[scheme.lower()], uri)
    ep = Endpoint(host=host, port=port, user=user, password=password,
                  vhost=unquote(path) if slash else "/", tls=tls)
    return _with_query(ep, query, uri) if query else ep


def parse_uris(uris: str | list[str] | tuple[str, ...]) -> list[Endpoint]:
    """One URI or several (a list, as a shovel's ``src-uri`` may be), each parsed."""
    items = [uris] if isinstance(uris, str) else list(uris)
    if not items:
        raise ValueError("no URI given")
    return [parse_uri(u) for u in items]


def _host_port(hostport: str, default: int, uri: str) -> tuple[str, int]:
    if hostport.startswith("["):  # IPv6 literal
        end = hostport.find("]")
        if end < 0:
            raise ValueError(f"unclosed '[' in the host: {_masked(uri)}")
        host, tail = hostport[1:end], hostport[end + 1 :]
        if tail and not tail.startswith(":"):
            raise ValueError(f"bad host: {_masked(uri)}")
        port_text = tail[1:]
    else:
        host, _, port_text = hostport.partition(":")
        host = unquote(host)
    if not port_text:
        return host, default
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad port {port_text!r}: {_masked(uri)}")
    return host, int(port_text)


def _with_query(ep: Endpoint, query: str, uri: str) -> Endpoint:
    changes: dict[str, object] = {}
    mechanisms: list[str] = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in _IGNORED:
            continue
        if key in _TLS_KEYS and not ep.tls:
            raise ValueError(f"{key} is for amqps:// URIs: {_masked(uri)}")
        if key in ("heartbeat", "channel_max", "frame_max"):
            changes[key] = _number(key, value, uri)
        elif key == "connection_timeout":
            changes[key] = _number(key, value, uri) / 1000.0
        elif key == "auth_mechanism":
            if value.lower() not in _MECHANISMS:
                raise ValueError(f"unknown auth_mechanism {value!r}: {_masked(uri)}")
            mechanisms.append(_MECHANISMS[value.lower()])
        elif key in ("cacertfile", "certfile", "keyfile"):
            changes[key] = value
        elif key == "password":
            changes["key_password"] = value
        elif key == "verify":
            if value not in ("verify_peer", "verify_none"):
                raise ValueError(f"verify is verify_peer or verify_none: {_masked(uri)}")
            changes["verify"] = value == "verify_peer"
        elif key == "server_name_indication":
            changes["server_name"] = "" if value == "disable" else value
        else:
            raise ValueError(f"unknown URI parameter {key!r}: {_masked(uri)}")
    if mechanisms:
        changes["mechanisms"] = tuple(mechanisms)
    return replace(ep, **changes)  # type: ignore[arg-type]


def _number(key: str, value: str, uri: str) -> int:
    if not value.isdigit():
        raise ValueError(f"{key} must be a whole number >= 0, not {value!r}: {_masked(uri)}")
    return int(value)


def _masked(uri: str) -> str:
    """``uri`` with any password replaced by ``***``."""
    scheme, sep, rest = uri.partition("://")
    authority, slash, tail = rest.partition("/")
    userinfo, at, hostport = authority.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    return f"{scheme}{sep}{userinfo}{at}{hostport}{slash}{tail}"
