"""PowerShell values as the interpreter and the cmdlets share them: conversions, member access,
output formatting, error records and the control-flow exceptions.

Apart from ``pseval`` (the interpreter) so that ``cmdlets`` imports these and not the interpreter,
and the interpreter imports the cmdlet table: no import runs both ways.
"""

from __future__ import annotations

import sys
from typing import Any

from .objects import DateTime, Item, Process, PSObj, type_name

NOT_RECOGNIZED = (
    "The term '{0}' is not recognized as the name of a cmdlet, function, script file, or operable "
    "program. Check the spelling of the name, or if a path was included, verify that the path is "
    "correct and try again."
)


class PSError(Exception):
    """An error record: message, category, FullyQualifiedErrorId, target."""

    def __init__(
        self,
        message: str,
        category: str = "NotSpecified",
        error_id: str = "RuntimeException",
        target: str = "",
        command: str = "",
    ):
        super().__init__(message)
        self.category, self.error_id, self.target, self.command = category, error_id, target, command


class Terminating(Exception):
    def __init__(self, err: PSError):
        self.err = err


class ExitScript(Exception):
    def __init__(self, code: int):
        self.code = code


class LoopControl(Exception):
    def __init__(self, kind: str):
        self.kind = kind


def not_recognized(name: str) -> PSError:
    return PSError(NOT_RECOGNIZED.format(name), "ObjectNotFound", "CommandNotFoundException", name)


# ------------------------------------------------------------------ values


def unroll(value: Any) -> list:
    """What a value sends down the pipeline: an array's items, nothing for $null."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, bytearray):
        return list(value)
    return [value]


def collapse(items: list) -> Any:
    """What an assignment keeps from pipeline output: $null, the one object, or an array."""
    if not items:
        return None
    return items[0] if len(items) == 1 else list(items)


def truthy(v: Any) -> bool:
    if isinstance(v, list):
        return len(v) > 1 or (len(v) == 1 and truthy(v[0]))
    if isinstance(v, str):
        return v != ""
    return bool(v) if v is not None else False


def to_str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    if isinstance(v, list):
        return " ".join(to_str(x) for x in v)
    if isinstance(v, (Item,)):
        return v.members()["FullName"]
    if isinstance(v, Process):
        return f"System.Diagnostics.Process ({v.members()['ProcessName']})"
    if isinstance(v, PSObj):
        return "@{" + "; ".join(f"{k}={to_str(x)}" for k, x in v.props.items()) + "}"
    if isinstance(v, bytearray):
        return "System.Byte[]"
    return str(v)


def to_num(v: Any) -> int | float:
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):
        s = v.strip()
        try:
            return int(s)
        except ValueError:
            try:
                return float(s)
            except ValueError:
                raise PSError(
                    f'Cannot convert value "{v}" to type "System.Int32". Error: "Input string was not '
                    'in a correct format."',
                    "InvalidArgument",
                    "InvalidCastFromStringToInteger",
                ) from None
    if v is None:
        return 0
    raise PSError(
        f'Cannot convert the "{to_str(v)}" value of type "{type_name(v)}" to type "System.Int32".',
        "InvalidArgument",
        "ConvertToFinalInvalidCastException",
    )


def get_member(obj: Any, name: str) -> Any:
    low = name.lower()
    if isinstance(obj, list):
        if low in ("count", "length"):
            return len(obj)
        vals = [get_member(x, name) for x in obj]  # member enumeration
        return collapse([v for v in vals if v is not None])
    if isinstance(obj, (str, bytearray)) and low == "length":
        return len(obj)
    if obj is None:
        return None
    members = obj.members() if hasattr(obj, "members") else {}
    for k, v in members.items():
        if k.lower() == low:
            return v
    if low == "count":
        return 1
    return None


def set_member(obj: Any, name: str, value: Any) -> None:
    if isinstance(obj, PSObj):
        for k in obj.props:
            if k.lower() == name.lower():
                obj.props[k] = value
                return
        obj.props[name] = value
        return
    raise PSError(f"'{name}' is a ReadOnly property.", "InvalidOperation", "PropertyAssignmentException")


# ------------------------------------------------------------------ output formatting


def _fmt_value(v: Any) -> str:
    if isinstance(v, list):
        return "{" + ", ".join(to_str(x) for x in v) + "}"
    return to_str(v)


def format_objects(items: list) -> str:
    """Out-Default: strings and numbers one per line; objects as a table (<= 4 properties) or a list."""
    out: list[str] = []
    table_keys: list[str] | None = None
    for v in items:
        if v is None:
            continue
        if not hasattr(v, "members") or isinstance(v, DateTime):
            table_keys = None
            out.append(to_str(v) + "\n")
            continue
        m = v.members()
        keys = list(m)
        if len(keys) <= 4:
            widths = [max(len(k), *(len(_fmt_value(m[k])) for k in keys)) for k in keys] if keys else []
            if table_keys != keys:
                out.append(
                    "\n" + " ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)).rstrip() + "\n"
                )
                out.append(
                    " ".join(("-" * len(k)).ljust(w) for k, w in zip(keys, widths, strict=True)).rstrip()
                    + "\n"
                )
                table_keys = keys
            out.append(
                " ".join(_fmt_value(m[k]).ljust(w) for k, w in zip(keys, widths, strict=True)).rstrip() + "\n"
            )
        else:
            table_keys = None
            width = max(len(k) for k in keys)
            out.append("\n" + "".join(f"{k.ljust(width)} : {_fmt_value(m[k])}\n" for k in keys))
    if any(hasattr(v, "members") and not isinstance(v, DateTime) for v in items):
        out.append("\n")
    return "".join(out)


def to_jsonable(v: Any, depth: int) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, DateTime):
        return f"/Date({v.to_unix_ms()})/"
    if isinstance(v, (list, bytearray)):
        return [to_jsonable(x, depth - 1) for x in v] if depth >= 0 else to_str(v)
    if hasattr(v, "members"):
        if depth < 0:
            return to_str(v)
        return {k: to_jsonable(x, depth - 1) for k, x in v.members().items()}
    return to_str(v)


class Out:
    """Where a statement's output goes: collected (captured) or written to stdout (top level)."""

    def __init__(self, direct: bool):
        self.direct = direct
        self.items: list = []

    def emit(self, items: list) -> None:
        if self.direct:
            text = format_objects(items)
            if text:
                sys.stdout.write(text)
                sys.stdout.flush()
        else:
            self.items.extend(items)


class TypeRef:
    """A type literal such as ``[IO.File]``, for static members."""

    def __init__(self, name: str):
        self.name = name.lower().removeprefix("system.")

    def members(self) -> dict[str, Any]:
        return {"FullName": "System." + self.name}
