# Sourced by scripts/test: the browser STOMP client (@stomp/stompjs, Apache-2.0) for
# tests/stomp/test_browser.py, fetched once from the npm registry at a pinned version and
# cached under .cache/ (never committed); the test runs Roost with --ws-test-page pointing
# at it. Without npm or network the browser test fails under scripts/test (it skips when
# pytest runs outside scripts/test; see tests/support.py prerequisite).
STOMPJS_VERSION=7.5.0
ensure_stompjs() {
    local dir=".cache/stompjs/$STOMPJS_VERSION"
    [ -f "$dir/stomp.umd.min.js" ] && return 0
    if ! command -v npm >/dev/null; then
        echo "roost: npm missing: the STOMP browser test will fail" >&2
        return 0
    fi
    local tmp
    tmp="$(mktemp -d)"
    if (cd "$tmp" && npm pack --silent "@stomp/stompjs@$STOMPJS_VERSION" >/dev/null) \
        && tar -xzf "$tmp"/stomp-stompjs-"$STOMPJS_VERSION".tgz -C "$tmp"; then
        mkdir -p "$dir"
        cp "$tmp/package/bundles/stomp.umd.min.js" "$tmp/package/LICENSE" "$dir/"
    else
        echo "roost: could not fetch @stomp/stompjs; the STOMP browser test will fail" >&2
    fi
    rm -rf "$tmp"
}
