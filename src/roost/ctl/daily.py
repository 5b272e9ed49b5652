"""The ``rabbitmqctl`` commands operators use every day, under their own names
(``roost ctl list_queues name messages``, ``roost ctl set_permissions -p / alice …``),
each also spelt with hyphens (``list-queues``). Each is a few management API calls.

As in rabbitmqctl: ``-p VHOST`` after the command name picks the vhost (before it, ``-p``
is the API password, as elsewhere in ``roost ctl``); ``list_*`` take RabbitMQ's column
names and print tab-separated rows under a header, after a "Listing …" line that ``-q``
leaves out (``--json`` prints the API's objects instead).
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roost.ctl.client import ApiClient, CtlError, seg

Result = tuple[Any, list[dict[str, Any]], list[str]] | None
Command = Callable[[ApiClient, argparse.Namespace], Result]


# -- users, vhosts, permissions, limits --------------------------------------------------


def _password(given: str | None) -> str:
    """As rabbitmqctl: the argument, else a line from standard input (or a prompt)."""
    if given is not None:
        return given
    if sys.stdin.isatty():
        return getpass.getpass("Password: ")
    return sys.stdin.readline().rstrip("\n")


def _user(api: ApiClient, name: str) -> dict[str, Any]:
    found: dict[str, Any] = api.get(f"/api/users/{seg(name)}")
    return found


def add_user(api: ApiClient, args: argparse.Namespace) -> Result:
    if api.exists(f"/api/users/{seg(args.username)}"):
        raise CtlError(0, f"user '{args.username}' already exists")
    api.put(f"/api/users/{seg(args.username)}", {"password": _password(args.password), "tags": ""})
    print(f'Adding user "{args.username}" ...')
    return None


def delete_user(api: ApiClient, args: argparse.Namespace) -> Result:
    api.delete(f"/api/users/{seg(args.username)}")
    print(f'Deleting user "{args.username}" ...')
    return None


def change_password(api: ApiClient, args: argparse.Namespace) -> Result:
    user = _user(api, args.username)
    body = {"password": _password(args.password), "tags": ",".join(user.get("tags", []))}
    api.put(f"/api/users/{seg(args.username)}", body)
    print(f'Changing password for user "{args.username}" ...')
    return None


def clear_password(api: ApiClient, args: argparse.Namespace) -> Result:
    user = _user(api, args.username)
    body = {"password_hash": "", "tags": ",".join(user.get("tags", []))}
    api.put(f"/api/users/{seg(args.username)}", body)
    print(f'Clearing password for user "{args.username}" ...')
    return None


def set_user_tags(api: ApiClient, args: argparse.Namespace) -> Result:
    _user(api, args.username)  # 404 for a user that does not exist (PUT would create it)
    # neither password nor hash: the user keeps the password it has
    api.put(f"/api/users/{seg(args.username)}", {"tags": ",".join(args.tags)})
    print(f'Setting tags for user "{args.username}" to [{", ".join(args.tags)}] ...')
    return None


def add_vhost(api: ApiClient, args: argparse.Namespace) -> Result:
    body: dict[str, Any] = {"description": args.description or ""}
    if args.default_queue_type:
        body["default_queue_type"] = args.default_queue_type
    api.put(f"/api/vhosts/{seg(args.name)}", body)
    print(f'Adding vhost "{args.name}" ...')
    return None


def delete_vhost(api: ApiClient, args: argparse.Namespace) -> Result:
    api.delete(f"/api/vhosts/{seg(args.name)}")
    print(f'Deleting vhost "{args.name}" ...')
    return None


def set_permissions(api: ApiClient, args: argparse.Namespace) -> Result:
    body = {"configure": args.conf, "write": args.write, "read": args.read}
    api.put(f"/api/permissions/{seg(args.vhost)}/{seg(args.username)}", body)
    print(f'Setting permissions for user "{args.username}" in vhost "{args.vhost}" ...')
    return None


def clear_permissions(api: ApiClient, args: argparse.Namespace) -> Result:
    api.delete(f"/api/permissions/{seg(args.vhost)}/{seg(args.username)}")
    print(f'Clearing permissions for user "{args.username}" in vhost "{args.vhost}" ...')
    return None


def set_topic_permissions(api: ApiClient, args: argparse.Namespace) -> Result:
    body = {"exchange": args.exchange, "write": args.write, "read": args.read}
    api.put(f"/api/topic-permissions/{seg(args.vhost)}/{seg(args.username)}", body)
    print(f'Setting topic permissions on "{args.exchange}" for user "{args.username}" ...')
    return None


def clear_topic_permissions(api: ApiClient, args: argparse.Namespace) -> Result:
    path = f"/api/topic-permissions/{seg(args.vhost)}/{seg(args.username)}"
    if args.exchange:
        path += f"?exchange={seg(args.exchange)}"
    api.delete(path)
    print(f'Clearing topic permissions for user "{args.username}" ...')
    return None


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise CtlError(0, f"{what} must be a JSON object, got '{text}'") from None
    if not isinstance(value, dict):
        raise CtlError(0, f"{what} must be a JSON object, got '{text}'")
    return value


def set_vhost_limits(api: ApiClient, args: argparse.Namespace) -> Result:
    for name, value in _json_object(args.definition, "limits").items():
        api.put(f"/api/vhost-limits/{seg(args.vhost)}/{seg(name)}", {"value": value})
    print(f'Setting vhost limits to "{args.definition}" for vhost "{args.vhost}" ...')
    return None


def clear_vhost_limits(api: ApiClient, args: argparse.Namespace) -> Result:
    for row in api.get(f"/api/vhost-limits/{seg(args.vhost)}"):
        for name in row.get("value", {}):
            api.delete(f"/api/vhost-limits/{seg(args.vhost)}/{seg(name)}")
    print(f'Clearing vhost "{args.vhost}" limits ...')
    return None


def set_user_limits(api: ApiClient, args: argparse.Namespace) -> Result:
    for name, value in _json_object(args.definition, "limits").items():
        api.put(f"/api/user-limits/{seg(args.username)}/{seg(name)}", {"value": value})
    print(f'Setting user limits to "{args.definition}" for user "{args.username}" ...')
    return None


def clear_user_limits(api: ApiClient, args: argparse.Namespace) -> Result:
    names = [args.limit]
    if args.limit == "all":
        rows = api.get(f"/api/user-limits/{seg(args.username)}")
        names = [n for row in rows for n in row.get("value", {})]
    for name in names:
        api.delete(f"/api/user-limits/{seg(args.username)}/{seg(name)}")
    print(f'Clearing "{args.limit}" limit for user "{args.username}" ...')
    return None


# -- policies and parameters ------------------------------------------------------------


def _policy(kind: str) -> Command:
    def run(api: ApiClient, args: argparse.Namespace) -> Result:
        body = {
            "pattern": args.pattern,
            "definition": _json_object(args.definition, "definition"),
            "priority": args.priority,
            "apply-to": args.apply_to,
        }
        api.put(f"/api/{kind}/{seg(args.vhost)}/{seg(args.name)}", body)
        print(f'Setting policy "{args.name}" for pattern "{args.pattern}" ...')
        return None

    return run


def _clear_policy(kind: str) -> Command:
    def run(api: ApiClient, args: argparse.Namespace) -> Result:
        api.delete(f"/api/{kind}/{seg(args.vhost)}/{seg(args.name)}")
        print(f'Clearing policy "{args.name}" on vhost "{args.vhost}" ...')
        return None

    return run


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise CtlError(0, f"the value must be JSON, got '{text}'") from None


def set_parameter(api: ApiClient, args: argparse.Namespace) -> Result:
    path = f"/api/parameters/{seg(args.component)}/{seg(args.vhost)}/{seg(args.name)}"
    body = {
        "vhost": args.vhost,
        "component": args.component,
        "name": args.name,
        "value": _parsed(args.value),
    }
    api.put(path, body)
    print(f'Setting runtime parameter "{args.name}" for component "{args.component}" ...')
    return None


def clear_parameter(api: ApiClient, args: argparse.Namespace) -> Result:
    api.delete(f"/api/parameters/{seg(args.component)}/{seg(args.vhost)}/{seg(args.name)}")
    print(f'Clearing runtime parameter "{args.name}" for component "{args.component}" ...')
    return None


def set_global_parameter(api: ApiClient, args: argparse.Namespace) -> Result:
    body = {"name": args.name, "value": _parsed(args.value)}
    api.put(f"/api/global-parameters/{seg(args.name)}", body)
    print(f'Setting global runtime parameter "{args.name}" ...')
    return None


def set_cluster_name(api: ApiClient, args: argparse.Namespace) -> Result:
    api.put("/api/cluster-name", {"name": args.name})
    print(f"Setting cluster name to {args.name} ...")
    return None


def clear_global_parameter(api: ApiClient, args: argparse.Namespace) -> Result:
    api.delete(f"/api/global-parameters/{seg(args.name)}")
    print(f'Clearing global runtime parameter "{args.name}" ...')
    return None


# -- connections, queues, tracing ---------------------------------------------------------


def close_connection(api: ApiClient, args: argparse.Namespace) -> Result:
    api.delete(f"/api/connections/{seg(args.name)}", headers={"X-Reason": args.explanation})
    print(f'Closing connection "{args.name}", reason: {args.explanation}...')
    return None


def close_all_connections(api: ApiClient, args: argparse.Namespace) -> Result:
    rows = api.get("/api/connections")
    if not args.global_:
        rows = [c for c in rows if c.get("vhost") == args.vhost]
    for conn in rows:
        api.delete(f"/api/connections/{seg(conn['name'])}", headers={"X-Reason": args.explanation})
    print(f"Closed {len(rows)} connections")
    return None


def purge_queue(api: ApiClient, args: argparse.Namespace) -> Result:
    api.delete(f"/api/queues/{seg(args.vhost)}/{seg(args.queue)}/contents")
    print(f'Purging queue "{args.queue}" in vhost "{args.vhost}" ...')
    return None


def delete_queue(api: ApiClient, args: argparse.Namespace) -> Result:
    query = "&".join(
        f"{flag}=true"
        for flag, on in (("if-empty", args.if_empty), ("if-unused", args.if_unused))
        if on
    )
    path = f"/api/queues/{seg(args.vhost)}/{seg(args.queue)}" + (f"?{query}" if query else "")
    api.delete(path)
    print(f"Deleting queue '{args.queue}' on vhost '{args.vhost}' ...")
    return None


def trace(on: bool) -> Command:
    def run(api: ApiClient, args: argparse.Namespace) -> Result:
        vhost = api.get(f"/api/vhosts/{seg(args.vhost)}")
        body = {
            "description": vhost.get("description", ""),
            "tags": vhost.get("tags", []),
            "tracing": on,
        }
        api.put(f"/api/vhosts/{seg(args.vhost)}", body)
        state = "Starting" if on else "Stopping"
        print(f'{state} tracing for vhost "{args.vhost}" ...')
        return None

    return run


def profile(api: ApiClient, args: argparse.Namespace) -> Result:
    """POST /api/profile: the server records for --seconds, then sends the file."""
    api.timeout = max(api.timeout, args.seconds + 60)
    print(f"Recording {args.seconds:g} s of the broker ({args.format}) ...", file=sys.stderr)
    body, name = api.download(
        "POST", "/api/profile", {"seconds": args.seconds, "format": args.format}
    )
    path = Path(args.output or name)
    path.write_bytes(body)
    opener = {
        "pstats": f"python -m pstats {path}",
        "flamegraph": f"a web browser: {path}",
        "speedscope": f"https://www.speedscope.app or the speedscope CLI: {path}",
    }[args.format]
    print(f"Wrote {path} ({len(body)} bytes); open it with {opener}")
    return None
