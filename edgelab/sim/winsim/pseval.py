"""Evaluate the PowerShell subset (see psparse) on a persona: cmdlets, variables, natives, errors, exit codes.

Semantics follow Microsoft's documentation for Windows PowerShell 5.1 where edgelab depends on
them: non-terminating cmdlet errors print an error record to stderr and set ``$?`` (``-ErrorAction``
and ``$ErrorActionPreference`` 'Stop' make them terminating, 'SilentlyContinue' hides them); an
unknown command is CommandNotFoundException; ``powershell -Command`` / ``-EncodedCommand`` exits
with ``exit N``'s N, else 1 when the last statement failed ($? false, including a native exit code
other than 0) and 0 otherwise. Native arguments are passed as an argv (the behaviour of
``$PSNativeCommandArgumentPassing = 'Standard'``); ``Start-Process -ArgumentList`` takes one
command line, split by CommandLineToArgvW rules.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any

from . import fs
from . import psparse as P
from .objects import (
    DateTime,
    FileStream,
    HashAlgorithm,
    Item,
    Process,
    PSObj,
    proc_alive,
    proc_table,
)
from .values import (
    ExitScript,
    LoopControl,
    Out,
    PSError,
    Terminating,
    TypeRef,
    collapse,
    format_objects,
    get_member,
    not_recognized,
    set_member,
    to_num,
    to_str,
    truthy,
    unroll,
)

# ------------------------------------------------------------------ the interpreter


def _params(cmd_args: list, interp: Interp) -> tuple[dict[str, Any], list]:
    """Named parameters (lower-case name -> value, True for a switch) and positional values."""
    named: dict[str, Any] = {}
    pos: list = []
    i = 0
    while i < len(cmd_args):
        a = cmd_args[i]
        if isinstance(a, P.Param):
            if a.value is not None:
                named[a.name.lower()] = interp.eval(a.value)
            elif (
                i + 1 < len(cmd_args)
                and not isinstance(cmd_args[i + 1], P.Param)
                and a.name.lower() not in SWITCHES
            ):
                named[a.name.lower()] = interp.eval(cmd_args[i + 1])
                i += 1
            else:
                named[a.name.lower()] = True
        else:
            pos.append(interp.eval(a))
        i += 1
    return named, pos


SWITCHES = {
    "force",
    "passthru",
    "file",
    "directory",
    "recurse",
    "raw",
    "compress",
    "nonewline",
    "wait",
    "nonewwindow",
    "presentonly",
    "asstring",
    "noprofile",
    "noninteractive",
}


class Interp:
    def __init__(self, env: dict[str, str], persona_dir: str | None):
        self.env = env
        self.persona_dir = persona_dir
        self.vars: dict[str, Any] = {
            "null": None,
            "true": True,
            "false": False,
            "pid": os.getpid(),
            "erroractionpreference": "Continue",
            "lastexitcode": 0,
            "?": True,
        }
        self.ok = True  # $? of the last statement
        self.action: str | None = None  # -ErrorAction of the cmdlet running now
        self.prev_ok = True  # what $? reads: the status of the statement before this one
        home = env.get("USERPROFILE", "")
        cwd = fs.from_host(os.getcwd())
        self.cwd = cwd if fs.is_windows_path(cwd) else (home or cwd)

    # -- paths ----------------------------------------------------------------------------
    def host(self, path: Any) -> str:
        p = to_str(path)
        if p.lower().startswith("filesystem::"):
            p = p[12:]
        return fs.to_host(p, self.cwd)

    # -- variables ------------------------------------------------------------------------
    def get_var(self, name: str) -> Any:
        low = name.lower()
        if low.startswith("env:"):
            key = name[4:]
            for k, v in self.env.items():
                if k.lower() == key.lower():
                    return v
            return None
        if low in ("global:", "script:", "local:"):
            low = low.split(":", 1)[1]
        if low == "?":
            return self.prev_ok
        return self.vars.get(low.split(":", 1)[-1])

    def set_var(self, name: str, value: Any) -> None:
        low = name.lower()
        if low.startswith("env:"):
            key = name[4:]
            for k in list(self.env):
                if k.lower() == key.lower():
                    del self.env[k]
            if value is not None and to_str(value) != "":
                self.env[key] = to_str(value)
                os.environ[key] = to_str(value)
            else:
                os.environ.pop(key, None)
            return
        self.vars[low.split(":", 1)[-1]] = value

    # -- statements -----------------------------------------------------------------------
    def run_statements(self, stmts: list, out: Out) -> None:
        for stmt in stmts:
            self.run_statement(stmt, out)

    def run_statement(self, stmt: P.Node, out: Out) -> None:
        try:
            self._statement(stmt, out)
        except PSError as e:
            self.error(e)

    def error(self, e: PSError, action: str | None = None) -> None:
        """A non-terminating error under the preference in force: report, hide, or stop."""
        self.ok = False
        action = (
            action or self.action or to_str(self.get_var("ErrorActionPreference")) or "Continue"
        ).lower()
        if action == "stop":
            raise Terminating(e)
        if action in ("silentlycontinue", "ignore"):
            return
        report(e)

    def _statement(self, stmt: P.Node, out: Out) -> None:
        self.prev_ok = self.ok
        if isinstance(stmt, P.If):
            for cond, block in stmt.clauses:
                if truthy(self.eval(cond)):
                    self.run_statements(block.body, out)
                    return
            if stmt.orelse is not None:
                self.run_statements(stmt.orelse.body, out)
            return
        if isinstance(stmt, P.Foreach):
            for item in unroll(self.eval(stmt.iterable)):
                self.set_var(stmt.var, item)
                try:
                    self.run_statements(stmt.body.body, out)
                except LoopControl as c:
                    if c.kind == "break":
                        break
            return
        if isinstance(stmt, P.While):
            while truthy(self.eval(stmt.cond)):
                try:
                    self.run_statements(stmt.body.body, out)
                except LoopControl as c:
                    if c.kind == "break":
                        break
            return
        if isinstance(stmt, P.Exit):
            code = 0 if stmt.value is None else int(to_num(collapse(unroll(self.eval(stmt.value))) or 0))
            raise ExitScript(code)
        if isinstance(stmt, P.Break):
            raise LoopControl(stmt.kind)
        if isinstance(stmt, P.Assign):
            self.assign(stmt)
            self.ok = True
            return
        if isinstance(stmt, P.Pipeline):
            self.ok = True
            out.emit(self.pipeline(stmt, out.direct))
            return
        out.emit(unroll(self.eval(stmt)))

    def assign(self, a: P.Assign) -> None:
        target = a.target
        cast = None
        if isinstance(target, P.Cast):
            cast, target = target.type, target.expr
        if a.op in ("++", "--"):
            value = to_num(self.eval(target)) + (1 if a.op == "++" else -1)
        else:
            value = self.value_of(a.value)
            if a.op == "+=":
                old = self.eval(target)
                if isinstance(old, list):
                    value = old + unroll(value)
                elif isinstance(old, str):
                    value = old + to_str(value)
                elif old is None:
                    value = value
                else:
                    value = to_num(old) + to_num(value)
            elif a.op == "-=":
                value = to_num(self.eval(target)) - to_num(value)
        if cast:
            value = self.cast(cast, value)
        if isinstance(target, P.Var):
            self.set_var(target.name, value)
        elif isinstance(target, P.Member):
            set_member(self.eval(target.obj), target.name, value)
        elif isinstance(target, P.Index):
            obj = self.eval(target.obj)
            obj[int(to_num(self.eval(target.index)))] = value
        else:
            raise PSError("The assignment expression is not valid.", "ParserError", "InvalidLeftHandSide")

    def value_of(self, v: P.Node) -> Any:
        """The value an assignment (or a hash entry) keeps."""
        if isinstance(v, P.Pipeline) and len(v.elements) == 1 and not isinstance(v.elements[0], P.Command):
            return self.eval(v.elements[0])  # an expression keeps its value: $a = @() is an empty array
        return collapse(self.capture(v))  # command output: $null, the object, or an array

    def capture(self, node: P.Node) -> list:
        """The output objects of a statement or pipeline, captured."""
        if isinstance(node, P.Pipeline):
            return self.pipeline(node, False)
        if isinstance(node, P.Assign):
            self.assign(node)
            return []
        return unroll(self.eval(node))

    # -- pipelines ------------------------------------------------------------------------
    def pipeline(self, pl: P.Pipeline, direct: bool) -> list:
        items: list | None = None
        n = len(pl.elements)
        for k, el in enumerate(pl.elements):
            last = k == n - 1
            if isinstance(el, P.Command):
                items = self.command(el, items, direct and last)
            else:
                items = unroll(self.eval(el))
        return items or []

    def command(self, cmd: P.Command, input_items: list | None, direct: bool) -> list:
        name = to_str(self.eval(cmd.name)) if isinstance(cmd.name, P.Node) else cmd.name
        merge_err = any(r.stream == "2" and r.to_stream == "1" for r in cmd.redirects)
        discard_err = any(
            r.stream in ("2", "*")
            and r.to_stream is None
            and isinstance(r.target, P.Var)
            and r.target.name.lower() == "null"
            for r in cmd.redirects
        )
        file_out = next((r for r in cmd.redirects if r.stream in ("1", "*") and r.to_stream is None), None)
        from .cmdlets import CMDLETS, resolve_native

        key = name.lower()
        fn = CMDLETS.get(key)
        if fn is not None:
            named, pos = _params(cmd.args, self)
            action = named.pop("erroraction", None)
            named.pop("warningaction", None)
            named.pop("verbose", None)
            saved, self.action = self.action, (to_str(action) if action is not None else None)
            if discard_err:
                self.action = "SilentlyContinue"
            try:
                result = fn(self, named, pos, input_items or [])
            except PSError as e:
                e.command = e.command or name
                if discard_err:
                    self.ok = False
                    return []
                if merge_err and to_str(action or self.get_var("ErrorActionPreference")).lower() != "stop":
                    self.ok = False
                    return [f"{e.command} : {e}"]
                self.error(e, to_str(action) if action is not None else None)
                return []
            finally:
                self.action = saved
            items = result if isinstance(result, list) else unroll(result)
            if file_out is not None:
                self.write_redirect(file_out, items)
                return []
            return items
        exe = resolve_native(self, name)
        if exe is None:
            raise not_recognized(name)
        argv = [exe]
        for a in cmd.args:
            if isinstance(a, P.Param):
                argv.append("-" + a.name + (":" + to_str(self.eval(a.value)) if a.value is not None else ""))
            else:
                argv.extend(to_str(x) for x in unroll(self.eval(a)))
        return self.run_native(
            name, argv, input_items, direct and file_out is None, merge_err, discard_err, file_out
        )

    def write_redirect(self, r: P.Redirect, items: list) -> None:
        if isinstance(r.target, P.Var) and r.target.name.lower() == "null":
            return
        path = self.host(self.eval(r.target))
        text = format_objects(items)
        with open(path, "a" if r.append else "w", encoding="utf-16" if not r.append else "utf-16-le") as f:
            f.write(text.replace("\n", "\r\n"))

    def run_native(
        self,
        name: str,
        argv: list[str],
        input_items: list | None,
        direct: bool,
        merge_err: bool,
        discard_err: bool,
        file_out,
    ) -> list:
        from .cmdlets import NATIVE_BUILTINS

        builtin = NATIVE_BUILTINS.get(os.path.basename(argv[0]).lower())
        stdin_data = None
        if input_items:
            stdin_data = "".join(to_str(x) + "\n" for x in input_items).encode()
        if builtin is not None:
            import io

            o, e = io.StringIO(), io.StringIO()
            code = builtin(self, argv[1:], o, e)
            text, errtext = o.getvalue(), e.getvalue()
            if merge_err:
                text += errtext
            elif errtext and not discard_err:
                sys.stderr.write(errtext)
                sys.stderr.flush()
            self.set_native_status(code)
            if direct:
                sys.stdout.write(text)
                sys.stdout.flush()
                return []
            return text.splitlines()
        from .native import NotRunnable, launch_argv

        try:
            argv, env = launch_argv(argv[0], argv[1:])
        except NotRunnable as e:
            raise PSError(
                f"Program '{os.path.basename(argv[0])}' failed to run: {e}",
                "ResourceUnavailable",
                "NativeCommandFailed",
                name,
                name,
            ) from None
        stderr = subprocess.STDOUT if merge_err else (subprocess.DEVNULL if discard_err else None)
        if direct:
            sys.stdout.flush()
            r = subprocess.run(argv, input=stdin_data, stderr=stderr, env=env)
            self.set_native_status(r.returncode)
            return []
        r = subprocess.run(argv, input=stdin_data, stdout=subprocess.PIPE, stderr=stderr, env=env)
        self.set_native_status(r.returncode)
        return r.stdout.decode("utf-8", "replace").splitlines()

    def set_native_status(self, code: int) -> None:
        self.vars["lastexitcode"] = code
        self.ok = code == 0

    # -- expressions ----------------------------------------------------------------------
    def eval(self, node: Any) -> Any:
        if isinstance(node, P.Str):
            return node.value
        if isinstance(node, P.Num):
            return node.value
        if isinstance(node, P.Var):
            return self.get_var(node.name)
        if isinstance(node, P.Expand):
            return "".join(p if isinstance(p, str) else to_str(self.eval(p)) for p in node.parts)
        if isinstance(node, P.SubExpr):
            out = Out(False)
            for stmt in node.body:
                self._statement(stmt, out)
            return list(out.items) if node.array else collapse(out.items)
        if isinstance(node, P.Paren):
            return collapse(self.capture(node.pipeline))
        if isinstance(node, P.Pipeline):
            return collapse(self.pipeline(node, False))
        if isinstance(node, P.Block):
            return node
        if isinstance(node, P.ArrayLit):
            return [self.eval(x) for x in node.items]
        if isinstance(node, P.Hash):
            return PSObj({k: self.value_of(v) for k, v in node.pairs}, "System.Collections.Hashtable")
        if isinstance(node, P.TypeLit):
            return TypeRef(node.name)
        if isinstance(node, P.Cast):
            return self.cast(node.type, self.eval(node.expr))
        if isinstance(node, P.Member):
            obj = self.eval(node.obj)
            if node.static:
                from .cmdlets import static_member

                return static_member(self, obj, node.name)
            return get_member(obj, node.name)
        if isinstance(node, P.Call):
            obj = self.eval(node.obj)
            args = [self.eval(a) for a in node.args]
            from .cmdlets import call_method, static_call

            if node.static:
                return static_call(self, obj, node.name, args)
            return call_method(self, obj, node.name, args)
        if isinstance(node, P.Index):
            obj = self.eval(node.obj)
            idx = int(to_num(self.eval(node.index)))
            if isinstance(obj, (list, str, bytearray)):
                try:
                    return obj[idx]
                except IndexError:
                    return None
            return obj if idx in (0, -1) else None
        if isinstance(node, P.Unary):
            v = self.eval(node.expr)
            if node.op == "-not":
                return not truthy(v)
            if node.op == "-join":
                return "".join(to_str(x) for x in unroll(v))
            return -to_num(v)
        if isinstance(node, P.Binary):
            return self.binary(node)
        if isinstance(node, P.Command):
            return collapse(self.command(node, None, False))
        raise PSError(f"unsupported expression {type(node).__name__}", "ParserError", "UnexpectedToken")

    def cast(self, typ: str, v: Any) -> Any:
        t = typ.lower()
        if t == "void":
            return None
        if t in ("int", "long", "int32", "int64"):
            return int(round(to_num(v))) if not isinstance(v, str) else int(to_num(v))
        if t in ("double", "float", "decimal"):
            return float(to_num(v))
        if t == "string":
            return to_str(v)
        if t == "bool":
            return truthy(v)
        if t in ("array", "object[]"):
            return unroll(v)
        return v

    def binary(self, node: P.Binary) -> Any:
        op = node.op
        if op in ("-and", "-or"):
            left = truthy(self.eval(node.left))
            if op == "-and":
                return left and truthy(self.eval(node.right))
            return left or truthy(self.eval(node.right))
        left, right = self.eval(node.left), self.eval(node.right)
        case = op[1:2] == "c" and op[2:] and "-" + op[2:] in P.BINARY
        if op[1:2] in ("c", "i") and "-" + op[2:] in P.BINARY and op not in P.BINARY:
            op = "-" + op[2:]
        if op == "+":
            if isinstance(left, list):
                return left + unroll(right)
            if isinstance(left, str):
                return left + to_str(right)
            if left is None:
                return right
            return to_num(left) + to_num(right)
        if op in ("-", "*", "/", "%"):
            a, b = to_num(left), to_num(right)
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "%":
                return a % b
            r = a / b
            return int(r) if float(r).is_integer() else r
        if op == "-join":
            return to_str(right).join(to_str(x) for x in unroll(left))
        if op == "-replace":
            pat, rep = (right + [""])[:2] if isinstance(right, list) else (right, "")
            return re.sub(
                to_str(pat), to_str(rep).replace("$", "\\"), to_str(left), flags=0 if case else re.I
            )
        if op == "-split":
            return re.split(to_str(right), to_str(left))
        if op in ("-contains", "-notcontains", "-in", "-notin"):
            coll, item = (left, right) if op in ("-contains", "-notcontains") else (right, left)
            found = any(compare("-eq", x, item, case) for x in unroll(coll))
            return found if op in ("-contains", "-in") else not found
        if isinstance(left, list):  # comparison on an array filters it
            return [x for x in left if compare(op, x, right, case)]
        return compare(op, left, right, case)


def compare(op: str, a: Any, b: Any, case: bool = False) -> bool:
    if a is None or b is None:  # $null equals only $null
        if op in ("-eq", "-ne"):
            return (a is None and b is None) == (op == "-eq")
    if op in ("-like", "-notlike"):
        x, y = to_str(a), to_str(b)
        hit = fnmatch.fnmatchcase(x, y) if case else fnmatch.fnmatchcase(x.lower(), y.lower())
        return hit if op == "-like" else not hit
    if op in ("-match", "-notmatch"):
        hit = re.search(to_str(b), to_str(a), 0 if case else re.I) is not None
        return hit if op == "-match" else not hit
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        try:
            b = to_num(b)
        except PSError:
            return op == "-ne"
    elif isinstance(a, str) or a is None:
        a, b = to_str(a), to_str(b)
        if not case:
            a, b = a.lower(), b.lower()
    if op == "-eq":
        return a == b
    if op == "-ne":
        return a != b
    try:
        return {"-gt": a > b, "-ge": a >= b, "-lt": a < b, "-le": a <= b}[op]
    except TypeError:
        return False


# ------------------------------------------------------------------ error records and the entry point


def report(e: PSError) -> None:
    cmd = e.command or e.target
    head = f"{cmd} : {e}" if cmd else str(e)
    sys.stdout.flush()
    sys.stderr.write(f"{head}\nAt line:1 char:1\n+ {cmd}\n+ {'~' * max(1, len(cmd))}\n")
    short = e.error_id.split(",")[0]
    sys.stderr.write(f"    + CategoryInfo          : {e.category}: ({e.target}:String) [{cmd}], {short}\n")
    sys.stderr.write(f"    + FullyQualifiedErrorId : {e.error_id}\n \n")
    sys.stderr.flush()


def run_script(script: str, interp: Interp) -> int:
    """Run a whole script as ``powershell -Command`` does; returns the process exit code."""
    try:
        stmts = P.parse(script)
    except P.ParseError as e:
        sys.stderr.write(
            f"At line:1 char:{e.pos + 1}\n+ {script.splitlines()[0] if script else ''}\n"
            f"{e}\n    + CategoryInfo          : ParserError: (:) [], ParentContainsErrorRecordException\n"
            f"    + FullyQualifiedErrorId : {e.error_id}\n \n"
        )
        return 1
    out = Out(True)
    try:
        for stmt in stmts:
            interp.run_statement(stmt, out)
    except ExitScript as e:
        return e.code
    except Terminating as t:
        report(t.err)
        return 1
    except LoopControl:
        pass
    finally:
        sys.stdout.flush()
    return 0 if interp.ok else 1


def load_env(persona_dir: str | None) -> dict[str, str]:
    """The Windows environment of the persona (``data/env.json``) over nothing else: ``$env:PATH``
    is the session's PATH (the persona's programs)."""
    env: dict[str, str] = {}
    if persona_dir:
        path = os.path.join(persona_dir, "data", "env.json")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                env.update(json.load(f))
    env.setdefault("PATH", os.environ.get("PATH", ""))
    env.setdefault("COMPUTERNAME", os.uname().nodename.upper())
    return env


def which(name: str) -> str | None:
    return shutil.which(name)


def sleep(seconds: float) -> None:
    time.sleep(max(0.0, seconds))


__all__ = [
    "Interp",
    "PSError",
    "run_script",
    "load_env",
    "proc_alive",
    "proc_table",
    "FileStream",
    "HashAlgorithm",
    "Item",
    "Process",
    "PSObj",
    "DateTime",
]
