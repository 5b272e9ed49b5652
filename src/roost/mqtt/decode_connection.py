"""Decoders of the packets that open, keep and close a connection: CONNECT (with its
will and credentials), CONNACK, PINGREQ, PINGRESP, DISCONNECT and AUTH."""

from __future__ import annotations

from roost.mqtt.decode_fields import _done, _reason
from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import (
    AUTH,
    CONNACK,
    CONNECT,
    DISCONNECT,
    LEVELS,
    MQTT_5,
    PINGREQ,
    PINGRESP,
    PROTOCOL_NAMES,
    WILL,
    Auth,
    ConnAck,
    Connect,
    Disconnect,
    PingReq,
    PingResp,
    Properties,
    Will,
)
from roost.mqtt.properties import decode_properties
from roost.mqtt.reason_codes import (
    ALLOWED,
    MALFORMED_PACKET,
    PROTOCOL_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from roost.mqtt.topics import validate_topic_name
from roost.mqtt.wire import Reader


def _check_auth_props(props: Properties, ptype: int) -> None:
    if props.authentication_data is not None and props.authentication_method is None:
        raise MQTTError(PROTOCOL_ERROR, "authentication data without a method", ptype)


def _decode_connect(r: Reader, flags: int, level: int | None, role: str) -> Connect:
    name = r.string("protocol name")
    level = r.byte("protocol level")
    if level not in LEVELS or PROTOCOL_NAMES[level] != name:
        raise MQTTError(
            UNSUPPORTED_PROTOCOL_VERSION, f"protocol {name!r} level {level}", CONNECT
        )
    cflags = r.byte("connect flags")
    if cflags & 0x01:
        raise MQTTError(MALFORMED_PACKET, "reserved connect flag set", CONNECT)
    will_flag = bool(cflags & 0x04)
    will_qos = (cflags >> 3) & 0x03
    will_retain = bool(cflags & 0x20)
    if will_qos == 3:
        raise MQTTError(MALFORMED_PACKET, "will QoS 3", CONNECT)
    if not will_flag and (will_qos or will_retain):
        raise MQTTError(MALFORMED_PACKET, "will QoS or retain without a will", CONNECT)
    has_password = bool(cflags & 0x40)
    has_username = bool(cflags & 0x80)
    if has_password and not has_username and level < MQTT_5:
        raise MQTTError(MALFORMED_PACKET, "password without a user name", CONNECT)
    keep_alive = r.u16("keep alive")
    props = decode_properties(r, CONNECT) if level == MQTT_5 else Properties()
    _check_auth_props(props, CONNECT)
    client_id = r.string("client identifier")
    will = None
    if will_flag:
        will_props = decode_properties(r, WILL) if level == MQTT_5 else Properties()
        topic = r.string("will topic")
        validate_topic_name(topic)
        will = Will(topic, r.binary("will payload"), will_qos, will_retain, will_props)
    username = r.string("user name") if has_username else None
    password = r.binary("password") if has_password else None
    _done(r, CONNECT)
    return Connect(
        client_id, level, bool(cflags & 0x02), keep_alive, username, password, will, props
    )


def _decode_connack(r: Reader, flags: int, level: int, role: str) -> ConnAck:
    ack_flags = r.byte("acknowledge flags")
    if ack_flags & 0xFE:
        raise MQTTError(MALFORMED_PACKET, "reserved acknowledge flags set", CONNACK)
    code = r.byte("reason code")
    if level == MQTT_5:
        if code not in ALLOWED[CONNACK]:
            raise MQTTError(PROTOCOL_ERROR, f"CONNACK reason code 0x{code:02X}", CONNACK)
        props = decode_properties(r, CONNACK)
        _check_auth_props(props, CONNACK)
    else:
        if code > 5:
            raise MQTTError(PROTOCOL_ERROR, f"CONNACK return code {code}", CONNACK)
        props = Properties()
    if code and ack_flags:
        raise MQTTError(PROTOCOL_ERROR, "session present on a refused connection", CONNACK)
    _done(r, CONNACK)
    return ConnAck(code, bool(ack_flags), props)


def _decode_pingreq(r: Reader, flags: int, level: int, role: str) -> PingReq:
    _done(r, PINGREQ)
    return PingReq()


def _decode_pingresp(r: Reader, flags: int, level: int, role: str) -> PingResp:
    _done(r, PINGRESP)
    return PingResp()


def _decode_disconnect(r: Reader, flags: int, level: int, role: str) -> Disconnect:
    code = 0
    props = Properties()
    if level == MQTT_5 and r.remaining():
        code = _reason(r, DISCONNECT)
        if r.remaining():
            props = decode_properties(r, DISCONNECT)
    _done(r, DISCONNECT)
    return Disconnect(code, props)


def _decode_auth(r: Reader, flags: int, level: int, role: str) -> Auth:
    code = 0
    props = Properties()
    if r.remaining():
        code = _reason(r, AUTH)
        if r.remaining():
            props = decode_properties(r, AUTH)
    _check_auth_props(props, AUTH)
    _done(r, AUTH)
    return Auth(code, props)
