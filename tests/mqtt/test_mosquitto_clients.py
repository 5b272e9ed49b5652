"""Debian's mosquitto-clients (mosquitto_pub / mosquitto_sub, libmosquitto) against Roost,
MQTT 3.1.1 and 5.0: a retained QoS 1 message, then live ones through a wildcard."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from tests.mqtt.clients import Paho
from tests.support import RoostProcess, prerequisite


@pytest.fixture(scope="module")
def tools() -> None:
    if shutil.which("mosquitto_pub") is None or shutil.which("mosquitto_sub") is None:
        prerequisite("mosquitto-clients is not installed")


@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_pub_and_sub(roost: RoostProcess, tools: None, version: str) -> None:
    base = f"mosq-{uuid.uuid4().hex[:8]}"
    common = ["-h", "127.0.0.1", "-p", str(roost.mqtt_port), "-u", "guest", "-P", "guest",
              "-V", version]
    subprocess.run(["mosquitto_pub", *common, "-t", f"{base}/state", "-m", "on", "-q", "1",
                    "-r"], check=True, timeout=10)
    sub = subprocess.Popen(
        ["mosquitto_sub", *common, "-t", f"{base}/#", "-q", "1", "-C", "3", "-v", "-W", "10"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        # mosquitto_sub is subscribed once its retained message arrives; then publish
        paho = Paho(roost.mqtt_port, f"p-{base}")
        out_first = sub.stdout.readline() if sub.stdout else ""
        assert out_first.strip() == f"{base}/state on"
        subprocess.run(["mosquitto_pub", *common, "-t", f"{base}/a/b", "-m", "from mosquitto",
                        "-q", "1"], check=True, timeout=10)
        paho.publish(f"{base}/c", b"from paho", qos=1)
        rest, _ = sub.communicate(timeout=10)
        assert sorted(rest.splitlines()) == [f"{base}/a/b from mosquitto", f"{base}/c from paho"]
        assert sub.returncode == 0
        paho.close()
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()
