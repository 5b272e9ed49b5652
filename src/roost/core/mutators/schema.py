"""A small, documented subset of JSON Schema, stdlib only: ``type`` (a name or a list),
``enum``, ``properties``, ``required``, ``additionalProperties: false``, ``items``,
``minimum``/``maximum``, ``minLength``/``maxLength``. Other keywords are ignored."""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(value: Any, name: str) -> bool:
    if name not in _TYPES:
        raise ValueError(f"unknown JSON Schema type '{name}'")
    if isinstance(value, bool) and name in ("number", "integer"):
        return False  # JSON booleans are not numbers
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[name])


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> str | None:
    """None when ``value`` matches, else what is wrong and where."""
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_is(value, k) for k in kinds):
            return f"{path}: expected {' or '.join(kinds)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: not one of {schema['enum']}"
    if isinstance(value, dict):
        return _object(value, schema, path)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problem = validate(item, schema["items"], f"{path}[{i}]")
            if problem is not None:
                return problem
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path}: below the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path}: above the maximum {schema['maximum']}"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"{path}: shorter than {schema['minLength']}"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{path}: longer than {schema['maxLength']}"
    return None


def _object(value: dict[str, Any], schema: dict[str, Any], path: str) -> str | None:
    for name in schema.get("required", []):
        if name not in value:
            return f"{path}: '{name}' is required"
    properties = schema.get("properties", {})
    for name, item in value.items():
        sub = properties.get(name)
        if sub is None:
            if schema.get("additionalProperties") is False:
                return f"{path}: '{name}' is not allowed"
            continue
        problem = validate(item, sub, f"{path}.{name}")
        if problem is not None:
            return problem
    return None
