"""YAML that remembers where each value came from, so a catalog error can name file and line.

A plain ``yaml.safe_load`` throws the positions away; this loader keeps them on the containers
(``SrcDict.line``, ``SrcDict.key_lines``, ``SrcList.line``) so validators can point at the exact
line an operator has to fix.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import yaml

from edgelab.errors import CatalogError


class SrcDict(dict):
    """A mapping with its source position: ``line`` (1-based) and ``key_lines[key]``."""

    file: str = "?"
    line: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines: dict[str, int] = {}

    def where(self, key: str | None = None) -> str:
        """``file:line`` of ``key`` (or of the mapping itself)."""
        line = self.key_lines.get(key, self.line) if key is not None else self.line
        return f"{self.file}:{line}"


class SrcList(list):
    """A sequence with its source position and one line per item."""

    file: str = "?"
    line: int = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.item_lines: list[int] = []

    def where(self, index: int | None = None) -> str:
        if index is not None and 0 <= index < len(self.item_lines):
            return f"{self.file}:{self.item_lines[index]}"
        return f"{self.file}:{self.line}"


def _make_loader(file: str) -> type[yaml.SafeLoader]:
    class Loader(yaml.SafeLoader):
        pass

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> SrcDict:
        loader.flatten_mapping(node)
        out = SrcDict()
        out.file, out.line = file, node.start_mark.line + 1
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool):
                raise CatalogError(
                    f"{file}:{key_node.start_mark.line + 1}: a mapping key must be a plain value"
                )
            if key in out:
                raise CatalogError(f"{file}:{key_node.start_mark.line + 1}: duplicate key {key!r}")
            out[key] = loader.construct_object(value_node, deep=True)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out

    def construct_sequence(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> SrcList:
        out = SrcList(loader.construct_object(child, deep=True) for child in node.value)
        out.file, out.line = file, node.start_mark.line + 1
        out.item_lines = [child.start_mark.line + 1 for child in node.value]
        return out

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, construct_sequence)
    return Loader


MAX_YAML_BYTES = 16 << 20  # no catalog, runtime or playbook file is anywhere near this
MAX_YAML_DEPTH = 64


def _depth_error(text: str, file: str) -> CatalogError | None:
    """Refuse nesting deeper than MAX_YAML_DEPTH before the (recursive) parser sees it."""
    depth, line = 0, 1
    for tok in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(
            tok,
            yaml.BlockMappingStartToken
            | yaml.BlockSequenceStartToken
            | yaml.FlowMappingStartToken
            | yaml.FlowSequenceStartToken,
        ):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line = tok.start_mark.line + 1
                return CatalogError(f"{file}:{line}: nested deeper than {MAX_YAML_DEPTH} levels")
        elif isinstance(tok, yaml.BlockEndToken | yaml.FlowMappingEndToken | yaml.FlowSequenceEndToken):
            depth -= 1
    return None


_PARSED: dict[tuple[str, str], Any] = {}  # (file, text digest) -> parsed: a plan reads the catalog often


def load_text(text: str, file: str) -> Any:
    """Parse YAML text; syntax errors become :class:`CatalogError` naming ``file:line``.

    The same text of the same file is parsed once per process; each caller gets its own copy."""
    key = (file, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())
    if key not in _PARSED:
        _PARSED[key] = _parse(text, file)
    return copy.deepcopy(_PARSED[key])


def _parse(text: str, file: str) -> Any:
    try:
        deep = _depth_error(text, file)
        if deep is not None:
            raise deep
        return yaml.load(text, Loader=_make_loader(file))  # noqa: S506 - a SafeLoader subclass
    except CatalogError:
        raise
    except RecursionError:
        raise CatalogError(f"{file}:1: nested too deeply to read") from None
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1 if isinstance(exc.position, int) else 1
        raise CatalogError(f"{file}:{line}: not YAML text ({exc.reason}: {exc.character!r})") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        raise CatalogError(f"{file}:{line}: YAML syntax error: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{file}: YAML error: {exc}") from None


def load_file(path: Path) -> Any:
    """A YAML file; binary, non-UTF-8, huge and too deeply nested files are one CatalogError line."""
    try:
        size = path.stat().st_size
        if size > MAX_YAML_BYTES:
            raise CatalogError(
                f"{path}:1: {size} bytes is larger than the {MAX_YAML_BYTES >> 20} MiB a YAML file "
                "may have here"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read: {exc.strerror}", remedy="check the catalog path") from None
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise CatalogError(f"{path}:{line}: binary data (a NUL byte), not YAML text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CatalogError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x})", remedy="save the file as UTF-8"
        ) from None
    return load_text(text, str(path))
