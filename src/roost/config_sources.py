"""Where a configuration's values come from: the command line, ROOST_* variables and a
TOML file (``--config FILE``), in that order of precedence over the defaults of
roost/config.py; ``load`` merges them and checks the result (roost/config_checks.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roost.config import Config
from roost.config_checks import validate

FIELDS = {f.name: f for f in dataclasses.fields(Config)}


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_name(name: str) -> str:
    return "ROOST_" + name.upper()


def _coerce(name: str, value: Any) -> Any:
    default = FIELDS[name].default
    if isinstance(default, bool):
        return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
    if name == "bind" and isinstance(value, list | tuple):  # repeated flag, TOML list
        return ",".join(str(v) for v in value)
    if isinstance(value, Mapping):  # a TOML table, e.g. [log_categories]
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    return value if value is None else str(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML config file (flags win over it)")
    for name, f in FIELDS.items():
        default = f.default
        if isinstance(default, bool):  # a switch: --reuse-port, no value
            parser.add_argument(
                flag(name),
                dest=name,
                action="store_const",
                const=True,
                default=None,
                help=f"{f.metadata['help']} (default: off; env {env_name(name)}=1)",
            )
            continue
        parser.add_argument(
            flag(name),
            dest=name,
            default=None,
            action="append" if name == "bind" else "store",  # --bind A --bind B
            metavar=f.metadata.get("metavar") or name.split("_")[-1].upper(),
            help=f"{f.metadata['help']} (default: {default}; env {env_name(name)})",
        )


def load(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> Config:
    values: dict[str, Any] = {}
    path = getattr(args, "config", None) or environ.get("ROOST_CONFIG")
    if path:
        with Path(path).open("rb") as fh:
            data = tomllib.load(fh)
        shovels = data.pop("shovels", None)  # [shovels.NAME] tables, beside [server] or not
        data = data.get("server", data)
        shovels = data.pop("shovels", shovels)
        if shovels is not None:
            data["static_shovels"] = json.dumps(shovels)
        unknown = set(data) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown setting(s) in {path}: {', '.join(sorted(unknown))}")
        values.update(data)
    for name in FIELDS:
        if env_name(name) in environ:
            values[name] = environ[env_name(name)]
    for name in FIELDS:
        given = getattr(args, name, None)
        if given is not None:
            values[name] = given
    return validate(Config(**{k: _coerce(k, v) for k, v in values.items()}))
