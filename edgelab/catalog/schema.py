"""A small declarative checker for catalog mappings: types, required keys, allowed values.

Every problem is reported as ``file:line: what is wrong`` (all problems of a file at once), because
an operator editing YAML wants the line, not a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from edgelab.catalog.yamlsrc import SrcDict, SrcList
from edgelab.errors import CatalogError

_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a mapping",
}


@dataclass(frozen=True)
class Field:
    kind: type | tuple[type, ...]
    required: bool = False
    choices: tuple[Any, ...] | None = None
    items: type | tuple[type, ...] | None = None  # element type for lists
    minimum: float | None = None


def _type_ok(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False  # YAML 'yes' is not a number
    if float in kinds and isinstance(value, int):
        return True
    return isinstance(value, kinds)


def _type_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)


def check(data: Any, spec: dict[str, Field], what: str, where: str, errors: list[str]) -> bool:
    """Check ``data`` against ``spec``; append ``file:line: ...`` messages to ``errors``. True if clean."""
    before = len(errors)
    if not isinstance(data, dict):
        errors.append(f"{where}: {what} must be a mapping, got {type(data).__name__}")
        return False
    loc = data.where if isinstance(data, SrcDict) else (lambda key=None: where)
    for key in data:
        if key not in spec:
            known = ", ".join(sorted(spec))
            errors.append(f"{loc(key)}: unknown key {key!r} in {what} (known: {known})")
    for key, field in spec.items():
        if key not in data:
            if field.required:
                errors.append(f"{loc()}: {what} is missing required key {key!r}")
            continue
        value = data[key]
        if not _type_ok(value, field.kind):
            hint = ""
            if isinstance(value, str) and re.fullmatch(r"[0-9.]+[eE][0-9]+", value):
                hint = " (YAML reads 1.7e9 as text: write 1.7e+9)"
            errors.append(f"{loc(key)}: {key} must be {_type_name(field.kind)}, got {value!r}{hint}")
            continue
        if field.choices is not None and value not in field.choices:
            errors.append(
                f"{loc(key)}: {key} is {value!r}; expected one of {', '.join(map(str, field.choices))}"
            )
        if field.minimum is not None and isinstance(value, int | float) and value < field.minimum:
            errors.append(f"{loc(key)}: {key} must be >= {field.minimum}, got {value!r}")
        if field.items is not None and isinstance(value, list):
            for i, item in enumerate(value):
                if not _type_ok(item, field.items):
                    at = value.where(i) if isinstance(value, SrcList) else loc(key)
                    errors.append(f"{at}: {key}[{i}] must be {_type_name(field.items)}, got {item!r}")
    return len(errors) == before


def raise_if(errors: list[str]) -> None:
    """One :class:`CatalogError` carrying every problem, the first one first."""
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        err = CatalogError(errors[0] + more)
        err.problems = list(errors)  # type: ignore[attr-defined]
        raise err
