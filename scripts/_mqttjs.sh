# Sourced by scripts/test: the browser MQTT client (MQTT.js, the npm "mqtt" package, MIT)
# for tests/mqtt/test_browser.py, fetched once from the npm registry at a pinned version
# and cached under .cache/ (never committed), as _stompjs.sh does for the STOMP client.
MQTTJS_VERSION=5.16.0
ensure_mqttjs() {
    local dir=".cache/mqttjs/$MQTTJS_VERSION"
    [ -f "$dir/mqtt.min.js" ] && return 0
    if ! command -v npm >/dev/null; then
        echo "roost: npm missing: the MQTT browser test will fail" >&2
        return 0
    fi
    local tmp
    tmp="$(mktemp -d)"
    if (cd "$tmp" && npm pack --silent "mqtt@$MQTTJS_VERSION" >/dev/null) \
        && tar -xzf "$tmp"/mqtt-"$MQTTJS_VERSION".tgz -C "$tmp"; then
        mkdir -p "$dir"
        cp "$tmp/package/dist/mqtt.min.js" "$tmp/package/LICENSE.md" "$dir/"
    else
        echo "roost: could not fetch MQTT.js; the MQTT browser test will fail" >&2
    fi
    rm -rf "$tmp"
}
