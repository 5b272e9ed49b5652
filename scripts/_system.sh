# Sourced by scripts/test: system tools some tests drive, installed when missing (CI starts
# from a clean machine). Needs root and apt; elsewhere it says what is missing, and the
# tests that need the tool skip.

_apt_updated=""
_apt() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "roost: cannot install $* (needs root and apt-get); tests needing it will skip" >&2
        return 1
    fi
    if [ -z "$_apt_updated" ]; then
        apt-get update -qq >&2 && _apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# ensure_command COMMAND PACKAGE: install Debian's PACKAGE unless COMMAND is on PATH.
ensure_command() {
    command -v "$1" >/dev/null || _apt "$2" || true
}

# rabbitmqadmin is one Python script inside Debian's rabbitmq-server package: take just
# that file from the .deb (no Erlang, no service started) and put it in the venv.
ensure_rabbitmqadmin() {
    command -v rabbitmqadmin >/dev/null && return 0
    [ -x .venv/bin/rabbitmqadmin ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "roost: rabbitmqadmin missing (needs root and apt-get); its test will skip" >&2
        return 0
    fi
    local tmp
    tmp="$(mktemp -d)"
    [ -n "$_apt_updated" ] || { apt-get update -qq >&2 && _apt_updated=1; }
    if (cd "$tmp" && apt-get download -qq rabbitmq-server >&2) \
        && dpkg-deb -x "$tmp"/rabbitmq-server_*.deb "$tmp/x"; then
        install -m 755 "$tmp/x/usr/bin/rabbitmqadmin" .venv/bin/rabbitmqadmin
    else
        echo "roost: could not fetch rabbitmqadmin; its test will skip" >&2
    fi
    rm -rf "$tmp"
}

# RabbitMQ itself, for the interop tests (tests/rabbitmq.py starts throwaway nodes on free
# ports from its scripts): Debian's package. The package may start a system node of its
# own; that one is stopped and disabled, the tests never use it.
ensure_rabbitmq_server() {
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] && return 0
    _apt rabbitmq-server || return 0
    if command -v systemctl >/dev/null && systemctl is-active --quiet rabbitmq-server; then
        systemctl disable --now rabbitmq-server >&2 || true
    elif command -v invoke-rc.d >/dev/null; then
        invoke-rc.d rabbitmq-server stop >&2 || true
    fi
}

# ensure_build_tools: a C compiler and the Python headers, so that installing Roost compiles
# its hot-path modules with mypyc (setup.py, docs/compiled.md); without them the install
# is pure Python. Called before the venv is made.
ensure_build_tools() {
    local python="${PYTHON:-python3}" include
    ensure_command gcc gcc
    include="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
    [ -f "$include/Python.h" ] || _apt python3-dev || true
}
