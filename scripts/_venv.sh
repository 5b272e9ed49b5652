# Sourced by scripts/server and scripts/test: make sure .venv exists and matches pyproject.toml.
# Usage: ensure_venv EXTRAS   (e.g. "" or "test")
ensure_venv() {
    local extras="$1" python="${PYTHON:-python3}"
    local stamp=".venv/.installed-${extras:-base}"
    if [ ! -x .venv/bin/python ]; then
        echo "roost: creating .venv with $($python --version)" >&2
        "$python" -m venv .venv
    fi
    # setup.py compiles the hot path; an edited compiled module runs as pure Python until
    # it is rebuilt (roost/_build.py), so a stale extension reinstalls too
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
        || ! .venv/bin/python -c 'import sys, roost._build as b; sys.exit(bool(b.stale_extensions()))' 2>/dev/null; then
        echo "roost: installing dependencies into .venv" >&2
        .venv/bin/python -m pip install --quiet --upgrade pip >&2
        .venv/bin/python -m pip install --quiet -e ".${extras:+[$extras]}" >&2
        touch "$stamp"
    fi
}
