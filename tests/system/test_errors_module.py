"""Every exception edgelab raises lives in edgelab/errors.py, and its docstring's tree is the real one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import edgelab
from edgelab import errors

ROOT = Path(edgelab.__file__).parent
# the virtual devices model other programs (PowerShell, adbd): their exceptions stay with them
OUTSIDE_ALLOWED = ("sim/",)


def _exception_classes_outside() -> list[str]:
    bases: dict[str, tuple[str, list[str]]] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases[f"{rel}:{node.name}"] = (node.name, [ast.unparse(b).split(".")[-1] for b in node.bases])
    known = {
        "BaseException",
        "Exception",
        "KeyboardInterrupt",
        "OSError",
        "RuntimeError",
        "ValueError",
        "KeyError",
        "TimeoutError",
        *(
            name
            for name, obj in vars(errors).items()
            if isinstance(obj, type) and issubclass(obj, BaseException)
        ),
    }
    found, grew = set(), True
    while grew:
        grew = False
        for key, (name, parents) in bases.items():
            if key not in found and any(p in known for p in parents):
                found.add(key)
                known.add(name)
                grew = True
    return sorted(k for k in found if not k.startswith(("errors.py:", *OUTSIDE_ALLOWED)))


def test_no_exception_class_outside_errors_py():
    assert _exception_classes_outside() == []


def test_the_docstring_tree_is_the_class_tree():
    doc = errors.__doc__ or ""
    tree = doc.split("The hierarchy::", 1)[1].split("\n\n    StepFailure", 1)[0]
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in tree.splitlines():
        m = re.match(r"^(\s*(?:[│ ]\s*)*(?:[├└]── )?)([A-Za-z_]+)\s", line)
        if not m:
            continue
        depth, name = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[name] = stack[-1][1]
        stack.append((depth, name))
    classes = {
        name: obj
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and issubclass(obj, errors.EdgelabError)
    }
    assert set(parents) | {"EdgelabError"} == set(classes), set(classes) ^ (set(parents) | {"EdgelabError"})
    for name, parent in parents.items():
        assert classes[name].__bases__[0].__name__ == parent, (name, parent)
    assert issubclass(errors.SSHNotAnswering, errors.DeviceNotAnswering)
    assert not issubclass(errors.StepFailure, errors.EdgelabError) and "StepFailure" in doc
