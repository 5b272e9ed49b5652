"""CONNECT: the login, the core connection and session, what MQTT 5 negotiates,
and a persistent session resumed (or a clean start's leftovers deleted)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from roost.core.errors import AccessRefused, BrokerError, NotFound
from roost.lifecycle import login, open_client
from roost.mqtt.errors import MQTTError
from roost.mqtt.limits import negotiate
from roost.mqtt.packets import MQTT_5, ConnAck, Connect, Properties
from roost.mqtt.reason_codes import (
    BAD_AUTHENTICATION_METHOD,
    BAD_USER_NAME_OR_PASSWORD,
    CLIENT_IDENTIFIER_NOT_VALID,
    NOT_AUTHORIZED,
    SERVER_UNAVAILABLE,
)
from roost.mqtt.session_state import TOPIC_ALIAS_MAXIMUM, SessionState, log, subscription_queue

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client


class Connecting(SessionState):
    def _on_connect(self, p: Connect) -> None:
        self.level = p.protocol_level
        self.reader.protocol_level = p.protocol_level
        v5 = self.level == MQTT_5
        if v5 and p.properties.authentication_method is not None:
            raise MQTTError(BAD_AUTHENTICATION_METHOD, "enhanced authentication is not offered")
        client_id = p.client_id
        assigned = None
        if not client_id:
            if not p.clean_start and not v5:
                raise MQTTError(CLIENT_IDENTIFIER_NOT_VALID, "empty id without clean session")
            client_id = assigned = f"roost-{os.urandom(12).hex()}"
        username = p.username
        password = (p.password or b"").decode("utf-8", "replace")
        cert_user = self.transport.cert_user if username is None else None
        if username is None:
            username, password = self.settings.default_user, self.settings.default_password
        vhost = self.settings.default_vhost
        if ":" in username:  # RabbitMQ's "vhost:user"
            vhost, username = username.split(":", 1)
        try:
            user = login(
                self.port, username, password, external=cert_user is not None,
                cert_user=cert_user, peer=self.transport.peer, protocol=self.protocol,
            )  # fmt: skip
        except AccessRefused as exc:
            raise MQTTError(BAD_USER_NAME_OR_PASSWORD, exc.text) from exc
        if not self.port.has_vhost(vhost):
            raise MQTTError(NOT_AUTHORIZED, f"no vhost '{vhost}'")
        try:
            client = open_client(
                self.port, self.gate, user, vhost,
                protocol=f"{self.protocol} {_VERSIONS.get(self.level, '?')}",
                peer=self.transport.peer, closer=self.force_close,
                properties={"client_id": client_id}, traffic=self.traffic,
                tls=self.transport.tls,
                mechanism="EXTERNAL" if cert_user is not None else "PLAIN",
            )
        except AccessRefused as exc:
            raise MQTTError(NOT_AUTHORIZED, exc.text) from exc
        except BrokerError as exc:
            raise MQTTError(SERVER_UNAVAILABLE, exc.text) from exc
        self.client = client
        self.client_id = client_id
        self.key = (vhost, client_id)
        old = self.shared.sessions.get(self.key)
        if old is not None and old is not self:
            old.taken_over()
        self.shared.sessions[self.key] = self
        pending = self.shared.pending_wills.pop(self.key, None)
        if pending is not None:  # the session resumed within the will delay: no will
            pending.cancel()
        self.session = self.port.open_session(client, self)
        self.publisher = self.gate.publisher(self.port)
        self.will = p.will
        if v5:
            expiry = p.properties.session_expiry_interval or 0
            self._session_expiry = expiry
            self.persistent = bool(expiry)
            # the session's queues go that long after its last connection, as RabbitMQ 3.13
            # does it (0xFFFFFFFF: never)
            if 0 < expiry < 0xFFFFFFFF:
                self._queue_arguments = {"x-expires": expiry * 1000}
            self._max_out = p.properties.maximum_packet_size or 0
            # receive maximum: the client's bound on QoS 1 deliveries in flight
            self._prefetch = min(self._prefetch, p.properties.receive_maximum or 65535)
            if p.properties.receive_maximum:  # across all its queues (shared ones too)
                self.session.set_qos(p.properties.receive_maximum, True)
        else:
            self.persistent = not p.clean_start
        props = Properties()  # the CONNACK's (MQTT 5)
        agreed = negotiate(  # keepalive, aliases, response information (mqtt/limits.py)
            p, client_id, max_keep_alive=self.settings.max_keep_alive,
            receive_maximum=self.settings.receive_maximum, props=props,
        )
        self._aliases_out = agreed.aliases
        present = self._resume_or_clean(client, p.clean_start)
        self._timers.cancel("connect")
        if agreed.keep_alive:
            self._keep_alive = agreed.keep_alive * 1.5  # the spec's "one and a half times"
            self._schedule(self._keep_alive + 0.01)
        if v5:
            props.assigned_client_identifier = assigned
            props.topic_alias_maximum = TOPIC_ALIAS_MAXIMUM
            props.maximum_packet_size = self.settings.max_packet_size
            props.retain_available = 1
            props.shared_subscription_available = 1
            props.subscription_identifier_available = 1
            props.maximum_qos = 1
        self._send(ConnAck(0, present, props))
        log.info(
            "%s: MQTT connection opened (user=%s vhost=%s client id=%s level=%d)",
            self.transport.peer, user.name, vhost, client_id, self.level,
        )

    def _resume_or_clean(self, client: Client, clean_start: bool) -> bool:
        """A clean start deletes what an earlier session left; a persistent session
        consumes the subscription queues it left and rejoins its shared groups, with the
        options its subscriptions had. Returns "session present"."""
        present = plain = False
        saved = self.shared.subscriptions.pop(self.key, None)
        if saved is not None and self.persistent and not clean_start:
            present = self._resume_subscriptions(saved)
        for qos in (0, 1):
            name = subscription_queue(self.client_id, qos)
            try:
                self.port.queue(client, name)
            except NotFound:
                continue
            if clean_start:
                self.port.delete_queue(client, name)
            elif self.persistent:
                present = plain = True
                self._consume(qos)
        if not plain:  # its queues expired meanwhile: the plain subscriptions went too
            self.subscriptions.forget_plain()
        return present


_VERSIONS: Final = {3: "3.1", 4: "3.1.1", 5: "5.0"}
