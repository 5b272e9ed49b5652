#!/usr/bin/env python3
"""Generate ``src/roost/amqp/codec_methods.py`` from RabbitMQ's machine-readable AMQP spec.

    python tools/gen_amqp.py            # (re)write the module
    python tools/gen_amqp.py --check    # exit 1 if the committed module is stale (CI)

The spec (``amqp-rabbitmq-0.9.1.json``, RabbitMQ's extensions included) lives in the
shared folder beside the repository and is never copied into it. Each method gets a
class with straight-line ``encode``/``decode`` built from precompiled ``struct.Struct``
objects: runs of fixed-size arguments (and the packed bits) are one pack/unpack call.
"""

from __future__ import annotations

import argparse
import difflib
import json
import keyword
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = "../shared/amqp/amqp-rabbitmq-0.9.1.json"
DEFAULT_OUT = "src/roost/amqp/codec_methods.py"

# struct format letter and size of each fixed-size AMQP type
FIXED = {"octet": ("B", 1), "short": ("H", 2), "long": ("I", 4), "longlong": ("Q", 8),
         "timestamp": ("Q", 8)}
PY_TYPES = {"octet": "int", "short": "int", "long": "int", "longlong": "int",
            "timestamp": "int", "bit": "bool", "shortstr": "str", "longstr": "bytes",
            "table": "dict[str, Any]"}
# Synchronous requests answered by something other than (only) their "-ok" method.
EXTRA_RESPONSES = {("basic", "get"): ("get-ok", "get-empty")}


@dataclass
class Argument:
    name: str  # python attribute name
    kind: str  # primitive AMQP type
    default: Any  # spec default; REQUIRED when the spec gives none

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass
class MethodSpec:
    class_name: str
    name: str
    class_id: int
    method_id: int
    synchronous: bool
    content: bool
    arguments: list[Argument]
    responses: tuple[str, ...]  # python class names

    @property
    def python_name(self) -> str:
        return camel(self.class_name) + camel(self.name)


REQUIRED = object()


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def attribute(name: str) -> str:
    python = name.replace("-", "_")
    return python + "_" if keyword.iskeyword(python) else python


def load(spec: dict[str, Any]) -> tuple[list[dict[str, Any]], list[MethodSpec], list[Argument]]:
    domains = {name: kind for name, kind in spec["domains"]}
    methods = []
    properties: list[Argument] = []
    for cls in sorted(spec["classes"], key=lambda c: c["id"]):
        names = {m["name"] for m in cls["methods"]}
        for method in cls["methods"]:
            arguments = [
                Argument(
                    attribute(arg["name"]),
                    domains[arg["domain"]] if "domain" in arg else arg["type"],
                    arg.get("default-value", REQUIRED),
                )
                for arg in method["arguments"]
            ]
            answers: tuple[str, ...] = ()
            if method.get("synchronous"):
                answers = EXTRA_RESPONSES.get((cls["name"], method["name"]), ())
                if not answers and method["name"] + "-ok" in names:
                    answers = (method["name"] + "-ok",)
            methods.append(MethodSpec(
                cls["name"], method["name"], cls["id"], method["id"],
                bool(method.get("synchronous")), bool(method.get("content")), arguments,
                tuple(camel(cls["name"]) + camel(a) for a in answers),
            ))
        if cls["name"] == "basic":
            properties = [Argument(attribute(p["name"]), p["type"], None)
                          for p in cls["properties"]]
    return spec["constants"], methods, properties


# -- argument layout ------------------------------------------------------------------------


def segments(arguments: list[Argument]) -> list[tuple[str, list[Argument]]]:
    """Split arguments into ("fixed", run) / ("bits", group) / (kind, [one]) segments.

    Consecutive bits share octets (8 per octet), so a bit group is itself fixed-size
    and merges with neighbouring fixed-size arguments into one struct call.
    """
    out: list[tuple[str, list[Argument]]] = []
    for arg in arguments:
        if arg.kind == "bit":
            if out and out[-1][0] == "bits" and len(out[-1][1]) < 8:
                out[-1][1].append(arg)
            else:
                out.append(("bits", [arg]))
        elif arg.kind in FIXED:
            out.append(("fixed", [arg]))
        else:
            out.append((arg.kind, [arg]))
    return out


def runs(arguments: list[Argument]) -> list[tuple[str, list[list[Argument]]]]:
    """Merge adjacent fixed/bits segments: ("struct", [segment, ...]) or (kind, [[arg]])."""
    merged: list[tuple[str, list[list[Argument]]]] = []
    for kind, args in segments(arguments):
        if kind in ("fixed", "bits"):
            if merged and merged[-1][0] == "struct":
                merged[-1][1].append(args)
            else:
                merged.append(("struct", [args]))
        else:
            merged.append((kind, [args]))
    return merged


def struct_format(group: list[list[Argument]]) -> str:
    return "".join("B" if seg[0].kind == "bit" else FIXED[seg[0].kind][0] for seg in group)


def struct_name(fmt: str) -> str:
    return f"_S_{fmt}"


def bits_expression(group: list[Argument]) -> str:
    if len(group) == 1:
        return f"1 if self.{group[0].name} else 0"
    return " | ".join(f"({1 << i} if self.{a.name} else 0)" for i, a in enumerate(group))


# -- rendering ------------------------------------------------------------------------------


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.structs: set[str] = set()

    def __call__(self, text: str = "", indent: int = 0) -> None:
        self.lines.append(("    " * indent + text) if text else "")


def default_literal(arg: Argument) -> str:
    if arg.kind == "table":
        return "None"
    if arg.kind == "longstr":
        return repr(str(arg.default).encode())
    if arg.kind == "bit":
        return repr(bool(arg.default))
    return repr(arg.default)


def render_init(w: Writer, method: MethodSpec) -> None:
    if not method.arguments:
        return
    params = []
    for arg in method.arguments:
        hint = PY_TYPES[arg.kind]
        if arg.kind == "table":
            hint = "dict[str, Any] | None"
        elif arg.kind == "longstr":
            hint = "bytes | str"
        params.append(f"{arg.name}: {hint}" if arg.required and arg.kind != "table"
                      else f"{arg.name}: {hint} = {default_literal(arg)}")
    w("def __init__(", 1)
    w("self,", 2)
    w("*,", 2)
    for param in params:
        w(param + ",", 2)
    w(") -> None:", 1)
    for arg in method.arguments:
        if arg.kind == "table":
            w(f"self.{arg.name} = {{}} if {arg.name} is None else {arg.name}", 2)
        elif arg.kind == "longstr":
            w(f"self.{arg.name} = {arg.name}.encode() if isinstance({arg.name}, str) "
              f"else {arg.name}", 2)
        else:
            w(f"self.{arg.name} = {arg.name}", 2)
    w()


def render_encode(w: Writer, method: MethodSpec) -> None:
    ids = (method.class_id, method.method_id)
    parts: list[str] = []
    layout = runs(method.arguments)
    if layout and layout[0][0] == "struct":  # fold the ids into the first struct call
        fmt = "HH" + struct_format(layout[0][1])
        parts.append(pack_call(w, fmt, [str(ids[0]), str(ids[1])], layout[0][1]))
        layout = layout[1:]
    else:
        parts.append('b"' + "".join(f"\\x{b:02x}" for b in
                                    (ids[0] >> 8, ids[0] & 255, ids[1] >> 8, ids[1] & 255)) + '"')
    for kind, group in layout:
        if kind == "struct":
            parts.append(pack_call(w, struct_format(group), [], group))
            continue
        name = group[0][0].name
        if kind == "shortstr":
            parts.append(f"encode_shortstr(self.{name})")
        elif kind == "longstr":
            parts.append(f"encode_longstr(self.{name})")
        else:  # table
            parts.append(f"encode_table(self.{name}) if self.{name} else _EMPTY_TABLE")
    w("def encode(self) -> bytes:", 1)
    if len(parts) == 1:
        emit_call(w, "return ", parts[0], "", 2)
    else:
        w("return b\"\".join((", 2)
        for part in parts:
            emit_call(w, "", part, ",", 3)
        w("))", 2)
    w()


def emit_call(w: Writer, prefix: str, call: str, suffix: str, indent: int) -> None:
    """One line if it fits in 100 columns, else the call's arguments one per line."""
    if 4 * indent + len(prefix + call + suffix) <= 100 or "(" not in call:
        w(prefix + call + suffix, indent)
        return
    head, args = call.split("(", 1)
    w(f"{prefix}{head}(", indent)
    for arg in split_arguments(args[:-1]):
        if 4 * (indent + 1) + len(arg) < 100:
            w(arg + ",", indent + 1)
            continue
        terms = arg.split(" | ")  # a long bits expression: one bit per line
        w(terms[0], indent + 1)
        for term in terms[1:-1]:
            w("| " + term, indent + 1)
        w("| " + terms[-1] + ",", indent + 1)
    w(")" + suffix, indent)


def split_arguments(text: str) -> list[str]:
    """Split on top-level commas (bit expressions contain parentheses)."""
    out, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += char
    return [*out, current.strip()]


def emit_tuple(w: Writer, prefix: str, items: list[str], indent: int) -> None:
    line = f"{prefix}({', '.join(items)}{',' if len(items) == 1 else ''})"
    if 4 * indent + len(line) <= 100:
        w(line, indent)
        return
    w(prefix + "(", indent)
    for item in items:
        w(item + ",", indent + 1)
    w(")", indent)


def pack_call(w: Writer, fmt: str, leading: list[str], group: list[list[Argument]]) -> str:
    w.structs.add(fmt)
    values = list(leading)
    for seg in group:
        if seg[0].kind == "bit":
            values.append(bits_expression(seg))
        else:
            values.append(f"self.{seg[0].name}")
    return f"{struct_name(fmt)}.pack({', '.join(values)})"


def render_decode(w: Writer, method: MethodSpec) -> None:
    # The object is built through its constructor from locals, not with
    # cls.__new__(cls) and attribute stores: mypyc (the compiled build) cannot compile
    # cls.__new__ on a native class. Locals are the argument names with a leading "_"
    # (an argument called "type" must not shadow the builtin).
    w("@classmethod", 1)
    w(f"def decode(cls, buf: Buffer, offset: int) -> {method.python_name}:", 1)
    if not method.arguments:
        w("if offset != len(buf):", 2)
        w("raise _malformed(cls, buf, offset)", 3)
        w(f"return {method.python_name}()", 2)
        w()
        return
    if any(a.kind == "shortstr" for a in method.arguments):
        w("if type(buf) is memoryview:  # slices of bytes decode faster than str(memoryview)", 2)
        w("buf = buf.tobytes()", 3)
    w("try:", 2)
    for kind, group in runs(method.arguments):
        if kind == "struct":
            render_unpack(w, group)
            continue
        name = group[0][0].name
        if kind == "shortstr":
            w("end = offset + 1 + buf[offset]", 3)
            w(f"_{name} = buf[offset + 1:end].decode()", 3)
            w("offset = end", 3)
        elif kind == "longstr":
            w("end = offset + 4 + _S_I.unpack_from(buf, offset)[0]", 3)
            w.structs.add("I")
            w(f"_{name} = bytes(buf[offset + 4:end])", 3)
            w("offset = end", 3)
        else:
            w(f"_{name}, offset = decode_table(buf, offset)", 3)
    w("except _DECODE_ERRORS as exc:", 2)
    w("raise _malformed(cls, buf, offset, exc) from None", 3)
    w("if offset != len(buf):", 2)
    w("raise _malformed(cls, buf, offset)", 3)
    emit_call(w, "return ", f"{method.python_name}("
              + ", ".join(f"{a.name}=_{a.name}" for a in method.arguments) + ")", "", 2)
    w()


def render_unpack(w: Writer, group: list[list[Argument]]) -> None:
    fmt = struct_format(group)
    targets = []
    for index, seg in enumerate(group):
        targets.append(f"_bits{index}" if seg[0].kind == "bit" else f"_{seg[0].name}")
    size = sum(1 if seg[0].kind == "bit" else FIXED[seg[0].kind][1] for seg in group)
    if fmt == "B":  # one octet: indexing is cheaper than a struct call
        w(f"{targets[0]} = buf[offset]", 3)
    else:
        w.structs.add(fmt)
        lhs = ", ".join(targets) if len(targets) > 1 else f"({targets[0]},)"
        w(f"{lhs} = {struct_name(fmt)}.unpack_from(buf, offset)", 3)
    w(f"offset += {size}", 3)
    for index, seg in enumerate(group):
        if seg[0].kind == "bit":
            for bit, arg in enumerate(seg):
                w(f"_{arg.name} = bool(_bits{index} & {1 << bit})", 3)


def render_method(w: Writer, method: MethodSpec) -> None:
    w()
    w()
    w(f"class {method.python_name}(Method):")
    w(f"\"\"\"{method.class_name}.{method.name}\"\"\"", 1)
    w()
    slots = [f'"{a.name}"' for a in method.arguments]
    emit_tuple(w, "__slots__ = ", slots, 1)
    w(f"CLASS_ID = {method.class_id}", 1)
    w(f"METHOD_ID = {method.method_id}", 1)
    # annotated: mypyc, compiling a module that reads m.SomeMethod.INDEX, cannot infer it
    w(f"INDEX: ClassVar[int] = 0x{method.class_id << 16 | method.method_id:08X}", 1)
    w(f"NAME = \"{method.class_name}.{method.name}\"", 1)
    w(f"SYNCHRONOUS = {method.synchronous}", 1)
    w(f"CONTENT = {method.content}", 1)
    emit_tuple(w, "ARGUMENTS = ", slots, 1)
    emit_tuple(w, "KINDS = ", [f'"{a.kind}"' for a in method.arguments], 1)
    w()
    if method.arguments:
        for arg in method.arguments:
            hint = PY_TYPES[arg.kind]
            w(f"{arg.name}: {hint}", 1)
        w()
    render_init(w, method)
    render_encode(w, method)
    render_decode(w, method)
    w.lines.pop()  # no blank line at the end of the class


def render(constants: list[dict[str, Any]], methods: list[MethodSpec],
           properties: list[Argument], spec_name: str) -> str:
    body = Writer()
    for method in methods:
        render_method(body, method)

    w = Writer()
    w(f"# GENERATED by tools/gen_amqp.py — do not edit. Source: {spec_name}")
    w("\"\"\"AMQP 0-9-1 method classes, basic properties and reply codes (RabbitMQ's spec).")
    w()
    w("One class per method: ``encode()`` returns the method frame payload (class id, method")
    w("id, arguments); ``decode(buf, offset)`` reads the arguments from ``offset`` (just after")
    w("the ids) to the end of ``buf`` and raises ``FrameError`` (501 with the class and method")
    w("ids, 502 for a bad field-table type tag) on truncated, overlong or undecodable input.")
    w("``decode_method(payload)`` dispatches on the ids (503 for unknown ones). Short strings")
    w("are ``str`` (invalid UTF-8 is 501, as RabbitMQ); long strings are ``bytes`` (a ``str``")
    w("given to ``__init__`` is UTF-8 encoded); tables are dicts. bytes/bytearray buffers decode")
    w("fastest; a memoryview is accepted too.")
    w("\"\"\"")
    w()
    w("from __future__ import annotations")
    w()
    w("import datetime")
    w("import struct")
    w("from typing import Any, ClassVar")
    w()
    w("from librt.strings import read_i32_be")
    w()
    w("from roost.amqp.codec import (")
    for name in ("decode_properties", "decode_table", "encode_longstr", "encode_properties",
                 "encode_shortstr", "encode_table"):
        w(f"{name},", 1)
    w(")")
    w("from roost.amqp.errors import FrameError")
    w("from roost.amqp.frames import NATIVE")
    w()
    render_constants(w, constants)
    w()
    w("# precompiled layouts: class/method ids and runs of fixed-size arguments")
    for fmt in sorted(body.structs | {"I"}):
        w(f"{struct_name(fmt)} = struct.Struct(\">{fmt}\")")
    w("_EMPTY_TABLE = b\"\\x00\\x00\\x00\\x00\"")
    w("Buffer = bytes | bytearray | memoryview")
    w("_DECODE_ERRORS = (struct.error, IndexError, UnicodeDecodeError, FrameError)")
    w()
    w()
    w.lines.extend(PREAMBLE.strip("\n").splitlines())
    w.lines.extend(body.lines)
    render_responses(w, methods)
    render_properties(w, properties)
    w()
    w()
    w.lines.extend(POSTAMBLE.strip("\n").splitlines())
    return "\n".join(w.lines).rstrip() + "\n"


def render_constants(w: Writer, constants: list[dict[str, Any]]) -> None:
    w("# -- reply codes " + "-" * 75)
    w()
    codes = [c for c in constants if c["name"] == "REPLY-SUCCESS" or "class" in c]
    for const in codes:
        w(f"{attribute(const['name']).upper()} = {const['value']}")
    w()
    for label, cls in (("SOFT_ERRORS", "soft-error"), ("HARD_ERRORS", "hard-error")):
        w(f"{label}: frozenset[int] = frozenset((")
        for c in codes:
            if c.get("class") == cls:
                w(f"{attribute(c['name']).upper()},", 1)
        w("))")
    w("REPLY_NAMES: dict[int, str] = {")
    for const in codes:
        w(f"{attribute(const['name']).upper()}: \"{attribute(const['name']).upper()}\",", 1)
    w("}")
    w("FRAME_MIN_SIZE = " + str(next(c["value"] for c in constants
                                     if c["name"] == "FRAME-MIN-SIZE")))


def render_responses(w: Writer, methods: list[MethodSpec]) -> None:
    w()
    w()
    w("# -- responses to synchronous requests " + "-" * 53)
    w()
    for method in methods:
        if method.responses:
            w(f"{method.python_name}.RESPONSES = ({', '.join(method.responses)},)")
    w()
    w("METHODS: dict[int, type[Method]] = {")
    w("method.INDEX: method for method in (", 1)
    for method in methods:
        w(f"{method.python_name},", 2)
    w(")", 1)
    w("}")


def render_properties(w: Writer, properties: list[Argument]) -> None:
    names = [p.name for p in properties]
    hints = {"shortstr": "str | None", "octet": "int | None", "table": "dict[str, Any] | None",
             # a datetime is taken too (encode_properties writes its seconds); declared,
             # since the compiled build checks what __init__ is given
             "timestamp": "int | datetime.datetime | None"}
    w()
    w()
    w("class BasicProperties:")
    w("\"\"\"basic's content properties, in spec order; None means absent.\"\"\"", 1)
    w()
    emit_tuple(w, "__slots__ = ", [f'"{n}"' for n in names], 1)
    # the names again, not "= __slots__": a compiled class body has no __slots__ to read
    emit_tuple(w, "NAMES: ClassVar[tuple[str, ...]] = ", [f'"{n}"' for n in names], 1)
    w()
    for prop in properties:
        w(f"{prop.name}: {hints[prop.kind]}", 1)
    w()
    w("def __init__(", 1)
    w("self,", 2)
    for prop in properties:
        w(f"{prop.name}: {hints[prop.kind]} = None,", 2)
    w(") -> None:", 1)
    for prop in properties:
        w(f"self.{prop.name} = {prop.name}", 2)
    w()
    w("def encode(self) -> bytes:", 1)
    w("\"\"\"Property flags + property list (the tail of a content header frame).\"\"\"", 2)
    w("return encode_properties(self)", 2)
    w()
    w("@classmethod", 1)
    w("def decode(cls, raw: bytes | memoryview) -> BasicProperties:", 1)
    w("return cls(*decode_properties(raw))", 2)
    w()
    w("def __eq__(self, other: object) -> bool:", 1)
    w("if type(other) is not BasicProperties:", 2)
    w("return NotImplemented", 3)
    w("return all(getattr(self, n) == getattr(other, n) for n in self.NAMES)", 2)
    w()
    w("__hash__ = None  # type: ignore[assignment]", 1)
    w()
    w("def __repr__(self) -> str:", 1)
    w("fields = (f\"{n}={getattr(self, n)!r}\" for n in self.NAMES", 2)
    w("          if getattr(self, n) is not None)", 2)
    w("return f\"BasicProperties({', '.join(fields)})\"", 2)


PREAMBLE = '''

class Method:
    """Base of every method class; see the class attributes for what the spec says."""

    __slots__ = ()
    CLASS_ID: ClassVar[int]
    METHOD_ID: ClassVar[int]
    INDEX: ClassVar[int]  # CLASS_ID << 16 | METHOD_ID
    NAME: ClassVar[str]  # "basic.publish"
    SYNCHRONOUS: ClassVar[bool]  # a request that expects one of RESPONSES
    CONTENT: ClassVar[bool]  # followed by a content header and body
    RESPONSES: ClassVar[tuple[type[Method], ...]] = ()
    ARGUMENTS: ClassVar[tuple[str, ...]]  # attribute names in wire order
    KINDS: ClassVar[tuple[str, ...]]  # their wire types ("shortstr", "table", ...)

    def encode(self) -> bytes:
        raise NotImplementedError

    @classmethod
    def decode(cls, buf: Buffer, offset: int) -> Method:
        """The method whose arguments start at ``offset`` and run to the end of ``buf``."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.ARGUMENTS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.ARGUMENTS)
        return f"{type(self).__name__}({fields})"


def _malformed(
    cls: type[Method], buf: Buffer, offset: int, exc: Exception | None = None
) -> FrameError:
    """The 501 FrameError for undecodable arguments, with the method's ids (as RabbitMQ)."""
    if isinstance(exc, FrameError):
        code, text = exc.reply_code, exc.reply_text
    elif isinstance(exc, UnicodeDecodeError):
        code, text = FRAME_ERROR, "FRAME_ERROR - Malformed UTF-8 in shortstr"
    elif exc is None and offset < len(buf):
        code, text = FRAME_ERROR, (
            f"FRAME_ERROR - cannot decode {cls.NAME}: {len(buf) - offset} bytes after the "
            "last argument"
        )
    else:
        code, text = FRAME_ERROR, f"FRAME_ERROR - cannot decode {cls.NAME}: arguments truncated"
    return FrameError(code, text, cls.CLASS_ID, cls.METHOD_ID)'''

POSTAMBLE = '''

def decode_method(payload: Buffer) -> Method:
    """Decode a whole method frame payload (ids + arguments)."""
    if NATIVE and type(payload) is bytes and len(payload) >= 4:
        # compiled, an inline C read where struct is a Python call (roost/amqp/frames.py)
        index = int(read_i32_be(payload, 0)) & 0xFFFF_FFFF
    else:
        try:
            (index,) = _S_I.unpack_from(payload, 0)
        except struct.error:
            raise FrameError(
                FRAME_ERROR, f"FRAME_ERROR - method frame of {len(payload)} bytes"
            ) from None
    cls = METHODS.get(index)
    if cls is None:
        class_id, method_id = index >> 16, index & 0xFFFF
        raise FrameError(
            COMMAND_INVALID,
            f"COMMAND_INVALID - unknown method {class_id}/{method_id}",
            class_id,
            method_id,
        )
    return cls.decode(payload, 4)'''


# -- entry point ----------------------------------------------------------------------------


def generate(spec_path: Path) -> str:
    spec = json.loads(spec_path.read_text())
    constants, methods, properties = load(spec)
    return render(constants, methods, properties, spec_path.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spec", default=DEFAULT_SPEC,
                        help="spec JSON, relative to the repository root (default: %(default)s)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="module to write (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the module differs from the spec's output")
    args = parser.parse_args(argv)
    spec, out = REPO / args.spec, REPO / args.out
    text = generate(spec)
    current = out.read_text() if out.exists() else ""
    if args.check:
        if current == text:
            return 0
        diff = difflib.unified_diff(current.splitlines(), text.splitlines(),
                                    str(out), "generated", lineterm="", n=1)
        print("\n".join(list(diff)[:40]), file=sys.stderr)
        print(f"{args.out} is stale: run python tools/gen_amqp.py", file=sys.stderr)
        return 1
    if current != text:
        out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
