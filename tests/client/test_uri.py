"""AMQP URIs as RabbitMQ's URI specification reads them (its appendix's examples), and
the Erlang client's query parameters."""

from __future__ import annotations

import pytest

from roost.client import Endpoint, parse_uri, parse_uris

# (URI, user, password, host, port, vhost): the specification's own table
SPEC_EXAMPLES = [
    ("amqp://user:pass@host:10000/vhost", "user", "pass", "host", 10000, "vhost"),
    ("amqp://user%61:%61pass@ho%61st:10000/v%2fhost", "usera", "apass", "hoast", 10000,
     "v/host"),
    ("amqp://", "guest", "guest", "", 5672, "/"),
    ("amqp://:@/", "", "", "", 5672, ""),
    ("amqp://user@", "user", "guest", "", 5672, "/"),
    ("amqp://user:pass@", "user", "pass", "", 5672, "/"),
    ("amqp://host", "guest", "guest", "host", 5672, "/"),
    ("amqp://:10000", "guest", "guest", "", 10000, "/"),
    ("amqp:///vhost", "guest", "guest", "", 5672, "vhost"),
    ("amqp://host/", "guest", "guest", "host", 5672, ""),
    ("amqp://host/%2f", "guest", "guest", "host", 5672, "/"),
    ("amqp://[::1]", "guest", "guest", "::1", 5672, "/"),
]


@pytest.mark.parametrize(("uri", "user", "password", "host", "port", "vhost"), SPEC_EXAMPLES)
def test_the_specifications_examples(
    uri: str, user: str, password: str, host: str, port: int, vhost: str
) -> None:
    ep = parse_uri(uri)
    assert (ep.user, ep.password, ep.host, ep.port, ep.vhost) == (user, password, host, port,
                                                                 vhost)
    assert not ep.tls


def test_amqps_defaults_to_5671_and_an_absent_host_connects_to_localhost() -> None:
    ep = parse_uri("amqps://h")
    assert (ep.tls, ep.port, ep.address) == (True, 5671, ("h", 5671))
    assert parse_uri("amqp://").address == ("localhost", 5672)
    assert parse_uri("amqp://[::1]:5673").address == ("::1", 5673)


def test_query_parameters() -> None:
    ep = parse_uri("amqp://h/v?heartbeat=5&connection_timeout=2500&channel_max=10"
                   "&frame_max=8192&auth_mechanism=amqplain&auth_mechanism=plain")
    assert (ep.heartbeat, ep.connection_timeout, ep.channel_max, ep.frame_max) == (
        5, 2.5, 10, 8192)
    assert ep.mechanisms == ("AMQPLAIN", "PLAIN")
    assert parse_uri("amqp://h").heartbeat is None  # not given: the caller's default


def test_tls_parameters() -> None:
    ep = parse_uri("amqps://h?cacertfile=/ca.pem&certfile=/c.pem&keyfile=/k.pem&password=s"
                   "&verify=verify_none&server_name_indication=other&depth=3"
                   "&fail_if_no_peer_cert=true&auth_mechanism=external")
    assert (ep.cacertfile, ep.certfile, ep.keyfile, ep.key_password) == (
        "/ca.pem", "/c.pem", "/k.pem", "s")
    assert (ep.verify, ep.server_name, ep.mechanisms) == (False, "other", ("EXTERNAL",))
    assert parse_uri("amqps://h?server_name_indication=disable").server_name == ""
    assert parse_uri("amqps://h").verify  # verified unless the URI says otherwise


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("http://h", "not an amqp:// or amqps:// URI"),
        ("h:5672", "not an amqp:// or amqps:// URI"),
        ("amqp://h/a/b", "must be written %2F"),
        ("amqp://h:99999", "bad port '99999'"),
        ("amqp://h:x", "bad port 'x'"),
        ("amqp://[::1", "unclosed"),
        ("amqp://h?heartbeet=5", "unknown URI parameter 'heartbeet'"),
        ("amqp://h?heartbeat=soon", "heartbeat must be a whole number"),
        ("amqp://h?cacertfile=/ca.pem", "cacertfile is for amqps:// URIs"),
        ("amqps://h?verify=maybe", "verify is verify_peer or verify_none"),
        ("amqp://h?auth_mechanism=kerberos", "unknown auth_mechanism 'kerberos'"),
    ],
)
def test_bad_uris_say_what_is_wrong(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_uri(uri)


def test_errors_and_display_never_show_the_password() -> None:
    with pytest.raises(ValueError) as err:
        parse_uri("amqp://bob:s3cret@h:99999/v")
    assert "s3cret" not in str(err.value) and "bob:***@h" in str(err.value)
    ep = parse_uri("amqps://bob:s3cret@h/a%2Fb")
    assert str(ep) == "amqps://bob@h:5671/a%2Fb"
    assert "s3cret" not in str(ep) and "s3cret" not in repr(ep)


def test_several_uris() -> None:
    assert [e.host for e in parse_uris(["amqp://a", "amqp://b"])] == ["a", "b"]
    assert parse_uris("amqp://a") == [Endpoint(host="a")]
    with pytest.raises(ValueError, match="no URI"):
        parse_uris([])
