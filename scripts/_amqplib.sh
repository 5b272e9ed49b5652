# Sourced by scripts/test: Node's AMQP client (amqplib, MIT) for tests/integration/
# test_amqplib.py, fetched once from the npm registry at a pinned version and cached
# under .cache/ (never committed). amqplib has no dependencies: the package alone is a
# complete node_modules entry. Without npm or network the test fails under scripts/test.
AMQPLIB_VERSION=2.3.1
ensure_amqplib() {
    local dir=".cache/amqplib/$AMQPLIB_VERSION/node_modules/amqplib"
    [ -f "$dir/callback_api.js" ] && return 0
    if ! command -v npm >/dev/null; then
        echo "roost: npm missing: the amqplib test will fail" >&2
        return 0
    fi
    local tmp
    tmp="$(mktemp -d)"
    if (cd "$tmp" && npm pack --silent "amqplib@$AMQPLIB_VERSION" >/dev/null) \
        && tar -xzf "$tmp/amqplib-$AMQPLIB_VERSION.tgz" -C "$tmp"; then
        mkdir -p "$(dirname "$dir")"
        rm -rf "$dir"
        mv "$tmp/package" "$dir"
    else
        echo "roost: could not fetch amqplib; the amqplib test will fail" >&2
    fi
    rm -rf "$tmp"
}
