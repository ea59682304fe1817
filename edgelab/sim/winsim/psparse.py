"""A parser for the PowerShell subset edgelab sends: statements, pipelines, commands, expressions.

Scannerless recursive descent, because PowerShell tokenizes differently in command mode
(``Get-Item -LiteralPath x``: bare words, parameters) and expression mode (``$a -eq 1``: operators).
It covers what ``edgelab.transport.winps`` lists (and the probe's statements): ``if``/``elseif``/
``else``, ``foreach``, ``while``, ``exit``, assignments (``=``, ``+=``, ``-=``, ``++``), pipelines
with redirections, ``&`` invocation, single/double-quoted strings with ``$var`` and ``$( )``
expansion, ``@( )``, ``$( )``, script blocks, type literals and casts, member and static member
access, method calls, indexing, comparison/logical/arithmetic/``-join`` operators and the comma
array operator. Anything else is a ParseError, reported the way PowerShell reports one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SQUOTES = "'\u2018\u2019\u201a\u201b"
EOF = "\x00"  # what peek() returns past the end (never a member of the character sets below)
TERMINATORS = ";\n|)}"
KEYWORDS = {"if", "elseif", "else", "foreach", "while", "exit", "break", "continue", "return", "in"}
BINARY = {
    # precedence: higher binds tighter
    "-and": 1,
    "-or": 1,
    "-xor": 1,
    "-eq": 3,
    "-ne": 3,
    "-gt": 3,
    "-ge": 3,
    "-lt": 3,
    "-le": 3,
    "-like": 3,
    "-notlike": 3,
    "-match": 3,
    "-notmatch": 3,
    "-contains": 3,
    "-notcontains": 3,
    "-in": 3,
    "-notin": 3,
    "-join": 4,
    "-replace": 4,
    "-split": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "%": 6,
}
_REDIRECT = re.compile(r"(\*|\d)?(>>?)(&(\d))?")


class ParseError(Exception):
    def __init__(self, message: str, pos: int, error_id: str = "UnexpectedToken"):
        super().__init__(message)
        self.pos, self.error_id = pos, error_id


# ------------------------------------------------------------------ AST


@dataclass
class Node:
    pos: int = field(default=0, kw_only=True)


@dataclass
class Str(Node):
    value: str


@dataclass
class Expand(Node):
    parts: list  # str | Node


@dataclass
class Num(Node):
    value: int | float


@dataclass
class Var(Node):
    name: str  # "env:LOCALAPPDATA", "_", "PID", ...


@dataclass
class SubExpr(Node):
    body: list  # statements; $( ) and @( ) both collect their output
    array: bool = False


@dataclass
class Paren(Node):
    pipeline: Node


@dataclass
class Block(Node):
    body: list


@dataclass
class TypeLit(Node):
    name: str


@dataclass
class Cast(Node):
    type: str
    expr: Node


@dataclass
class Member(Node):
    obj: Node
    name: str
    static: bool = False


@dataclass
class Call(Node):
    obj: Node
    name: str
    args: list
    static: bool = False


@dataclass
class Index(Node):
    obj: Node
    index: Node


@dataclass
class Binary(Node):
    op: str
    left: Node
    right: Node


@dataclass
class Unary(Node):
    op: str
    expr: Node


@dataclass
class ArrayLit(Node):
    items: list


@dataclass
class Hash(Node):
    pairs: list  # [(key, Node)]: @{ Key = value; ... }


@dataclass
class Param(Node):
    name: str
    value: Node | None = None  # -Name:value


@dataclass
class Redirect(Node):
    stream: str  # "1", "2", "*"
    append: bool
    to_stream: str | None  # "1" for 2>&1
    target: Node | None


@dataclass
class Command(Node):
    name: Node | str  # a command name, or an expression after &
    args: list  # Param | Node
    invoke: bool = False
    redirects: list = field(default_factory=list)


@dataclass
class Pipeline(Node):
    elements: list  # first may be an expression; the rest are Commands


@dataclass
class Assign(Node):
    target: Node
    op: str  # = += -= ++ --
    value: Node | None


@dataclass
class If(Node):
    clauses: list  # [(condition, Block)]
    orelse: Block | None


@dataclass
class Foreach(Node):
    var: str
    iterable: Node
    body: Block


@dataclass
class While(Node):
    cond: Node
    body: Block


@dataclass
class Exit(Node):
    value: Node | None


@dataclass
class Break(Node):
    kind: str  # break | continue


# ------------------------------------------------------------------ parser


class Parser:
    def __init__(self, src: str):
        self.s = src  # a CR inside a string literal is kept; outside one it is white space (see ws)
        self.i = 0

    # -- low level --------------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else EOF

    def at(self, text: str) -> bool:
        return self.s.startswith(text, self.i)

    def ws(self) -> None:
        """Spaces, tabs, line continuations and comments; never a newline."""
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch in " \t\r":
                self.i += 1
            elif ch == "`" and self.peek(1) == "\n":
                self.i += 2
            elif ch == "`" and self.peek(1) == "\r" and self.peek(2) == "\n":
                self.i += 3
            elif ch == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            else:
                break

    def ws_nl(self) -> None:
        while True:
            self.ws()
            if self.peek() == "\n":
                self.i += 1
                continue
            break

    def expect(self, ch: str) -> None:
        self.ws_nl()
        if self.peek() != ch:
            got = self.peek() if self.peek() != EOF else "end of input"
            raise ParseError(
                f"Missing '{ch}' (found {got!r}).",
                self.i,
                "MissingEndParenthesisInExpression"
                if ch == ")"
                else "MissingEndCurlyBrace"
                if ch == "}"
                else "UnexpectedToken",
            )
        self.i += 1

    def word(self) -> str:
        m = re.compile(r"[A-Za-z_][\w-]*").match(self.s, self.i)
        return m.group(0) if m else ""

    # -- statements -------------------------------------------------------------------------
    def parse_script(self, close: str = "") -> list:
        out = []
        while True:
            while True:
                self.ws()
                if self.peek() in (";", "\n"):
                    self.i += 1
                else:
                    break
            ch = self.peek()
            if ch == EOF or (close and ch == close):
                return out
            if ch in ")}":
                raise ParseError(f"Unexpected token '{ch}' in expression or statement.", self.i)
            out.append(self.parse_statement())

    def parse_block(self) -> Block:
        self.ws_nl()
        pos = self.i
        if self.peek() != "{":
            raise ParseError("Missing statement block.", self.i, "MissingStatementBlock")
        self.i += 1
        body = self.parse_script("}")
        self.expect("}")
        return Block(body, pos=pos)

    def parse_condition(self) -> Node:
        self.expect("(")
        self.ws_nl()
        cond = self.parse_pipeline_statement()
        self.expect(")")
        return cond

    def parse_statement(self) -> Node:
        pos = self.i
        w = self.word().lower()
        after = self.s[self.i + len(w) : self.i + len(w) + 1]
        if w in KEYWORDS and (after == "" or not re.match(r"[\w-]", after)):
            self.i += len(w)
            if w == "if":
                clauses = [(self.parse_condition(), self.parse_block())]
                orelse = None
                while True:
                    save = self.i
                    self.ws_nl()
                    nxt = self.word().lower()
                    if nxt == "elseif":
                        self.i += 6
                        clauses.append((self.parse_condition(), self.parse_block()))
                    elif nxt == "else":
                        self.i += 4
                        orelse = self.parse_block()
                        break
                    else:
                        self.i = save
                        break
                return If(clauses, orelse, pos=pos)
            if w == "foreach":
                self.expect("(")
                self.ws()
                if self.peek() != "$":
                    raise ParseError(
                        "Missing variable name after foreach.", self.i, "MissingVariableNameAfterForeach"
                    )
                self.i += 1
                var = self.word()
                self.i += len(var)
                self.ws()
                if self.word().lower() != "in":
                    raise ParseError(
                        "Missing 'in' after variable in foreach loop.", self.i, "MissingInInForeach"
                    )
                self.i += 2
                self.ws()
                it = self.parse_pipeline_statement()
                self.expect(")")
                return Foreach(var, it, self.parse_block(), pos=pos)
            if w == "while":
                return While(self.parse_condition(), self.parse_block(), pos=pos)
            if w in ("exit", "return"):
                self.ws()
                if self.peek() == EOF or self.peek() in TERMINATORS:
                    return Exit(None, pos=pos) if w == "exit" else Break("return", pos=pos)
                value = self.parse_expression()
                return Exit(value, pos=pos) if w == "exit" else Break("return", pos=pos)
            if w in ("break", "continue"):
                return Break(w, pos=pos)
            raise ParseError(f"Unexpected token '{w}' in expression or statement.", pos)
        return self.parse_pipeline_statement()

    def _expr_start(self) -> bool:
        ch = self.peek()
        if ch and ch in "$'\"(@[!" + SQUOTES[1:]:
            return True
        if ch.isdigit():
            return True
        if ch == "-" and (self.peek(1).isdigit() or re.compile(r"-(not|join)\b").match(self.s, self.i)):
            return True
        return False

    def parse_pipeline_statement(self) -> Node:
        pos = self.i
        if self.peek() == "$" or (self.peek() == "[" and self._cast_then_var()):
            save = self.i
            try:
                target = self.parse_unary()
            except ParseError:
                target = None
            if target is not None:
                self.ws()
                for op in ("++", "--", "+=", "-=", "="):
                    if self.at(op) and not self.at("=="):
                        self.i += len(op)
                        if op in ("++", "--"):
                            return Assign(target, op, None, pos=pos)
                        self.ws_nl()
                        return Assign(target, op, self.parse_pipeline_statement(), pos=pos)
            self.i = save
        return self.parse_pipeline()

    def _cast_then_var(self) -> bool:
        m = re.compile(r"\[[\w.\[\]]+\]\s*\$").match(self.s, self.i)
        return bool(m)

    def parse_pipeline(self) -> Pipeline:
        pos = self.i
        elements = [self.parse_expression() if self._expr_start() else self.parse_command()]
        while True:
            self.ws()
            if self.peek() == "|" and self.peek(1) != "|":
                self.i += 1
                self.ws_nl()
                elements.append(self.parse_command())
            else:
                break
        return Pipeline(elements, pos=pos)

    # -- commands ---------------------------------------------------------------------------
    def parse_command(self) -> Command:
        pos = self.i
        invoke = False
        if self.peek() == "&":
            self.i += 1
            self.ws()
            invoke = True
            name: Any = self.parse_command_arg()
        else:
            j = self.i
            while j < len(self.s) and not self.s[j].isspace() and self.s[j] not in TERMINATORS + "(,":
                j += 1
            name = self.s[self.i : j]
            if not name:
                raise ParseError(f"Unexpected token '{self.peek()}' in expression or statement.", self.i)
            self.i = j
        cmd = Command(name, [], invoke=invoke, pos=pos)
        while True:
            self.ws()
            ch = self.peek()
            if ch == EOF or ch in TERMINATORS:
                break
            m = _REDIRECT.match(self.s, self.i)
            if m and (m.group(1) or ch == ">"):
                self.i = m.end()
                target = None
                if not m.group(3):
                    self.ws()
                    target = self.parse_command_arg()
                cmd.redirects.append(
                    Redirect(m.group(1) or "1", m.group(2) == ">>", m.group(4), target, pos=m.start())
                )
                continue
            pm = re.compile(r"-([A-Za-z_][\w-]*)(:?)").match(self.s, self.i)
            if pm and not self.peek(1).isdigit():
                self.i = pm.end()
                value = None
                if pm.group(2):
                    self.ws()
                    value = self.parse_command_arg()
                cmd.args.append(Param(pm.group(1), value, pos=pm.start()))
                continue
            cmd.args.append(self.parse_command_arg_list())
        return cmd

    def parse_command_arg_list(self) -> Node:
        return self._comma_list(self.parse_command_arg)

    def _comma_list(self, item: Callable[[], Node]) -> Node:
        """``a, b, c`` (an array literal) or just ``a``: PowerShell's comma operator."""
        first = item()
        items = [first]
        while True:
            save = self.i
            self.ws()
            if self.peek() == ",":
                self.i += 1
                self.ws_nl()
                items.append(item())
            else:
                self.i = save
                break
        return first if len(items) == 1 else ArrayLit(items, pos=first.pos)

    def parse_command_arg(self) -> Node:
        ch = self.peek()
        pos = self.i
        if ch in '$(@{"' or ch in SQUOTES:
            return self.parse_postfix(self.parse_primary())  # $x, (...), @(...), @{...}, {...}, strings
        if ch == "[" and re.compile(r"\[[\w.]+\]").match(self.s, self.i):
            return self.parse_postfix(self.parse_primary())
        m = re.compile(r"-?\d+(\.\d+)?(?=[\s;|)},]|$)").match(self.s, self.i)
        if m:
            self.i = m.end()
            return Num(float(m.group(0)) if m.group(1) else int(m.group(0)), pos=pos)
        j = self.i
        buf = []
        while j < len(self.s) and not self.s[j].isspace() and self.s[j] not in TERMINATORS + ",":
            if self.s[j] == "`" and j + 1 < len(self.s):
                buf.append(self.s[j + 1])
                j += 2
                continue
            buf.append(self.s[j])
            j += 1
        if j == self.i:
            raise ParseError(
                f"Missing expression after '{self.s[self.i - 1 : self.i]}'.",
                self.i,
                "ExpectedValueExpression",
            )
        self.i = j
        return Str("".join(buf), pos=pos)

    # -- expressions ------------------------------------------------------------------------
    def parse_expression(self, min_prec: int = 1, comma: bool = True) -> Node:
        left = self.parse_comma() if comma else self.parse_unary()
        while True:
            save = self.i
            self.ws()
            op = self._binary_op()
            prec = None if op is None else BINARY.get(op, BINARY.get("-" + op[2:]))
            if op is None or prec < min_prec:
                self.i = save
                return left
            self.i += len(op)
            self.ws_nl()
            right = self.parse_expression(prec + 1, comma)
            left = Binary(op, left, right, pos=save)

    def _binary_op(self) -> str | None:
        """The operator at the cursor as written (``-ceq``/``-ieq`` keep their prefix), or None."""
        ch = self.peek()
        if ch == "-":
            m = re.compile(r"-([A-Za-z]+)\b").match(self.s, self.i)
            if m:
                op = m.group(0).lower()
                base = "-" + op[2:] if op[1:2] in ("c", "i") else op
                return op if op in BINARY or base in BINARY else None
            return "-" if not self.at("-=") and not self.at("--") else None
        if ch in "+*/%" and self.peek(1) != "=" and not self.at("++"):
            return ch
        return None

    def parse_comma(self) -> Node:
        return self._comma_list(self.parse_unary)

    def parse_unary(self) -> Node:
        pos = self.i
        if self.at("-not") and not re.match(r"[\w-]", self.peek(4)):
            self.i += 4
            self.ws()
            return Unary("-not", self.parse_unary(), pos=pos)
        if self.peek() == "!":
            self.i += 1
            self.ws()
            return Unary("-not", self.parse_unary(), pos=pos)
        if self.at("-join"):
            self.i += 5
            self.ws()
            return Unary("-join", self.parse_unary(), pos=pos)
        if self.peek() == "-" and (self.peek(1).isdigit() or self.peek(1) in "$("):
            self.i += 1
            return Unary("-", self.parse_unary(), pos=pos)
        if self.peek() == ",":
            self.i += 1
            self.ws()
            return ArrayLit([self.parse_unary()], pos=pos)
        if self.peek() == "[":
            m = re.compile(r"\[([\w.]+(?:\[\])?)\]").match(self.s, self.i)
            if m:
                self.i = m.end()
                if self.at("::"):
                    return self.parse_postfix(TypeLit(m.group(1), pos=pos))
                save = self.i
                self.ws()
                if self.peek() and (
                    self.peek() in "$('\"@[" or self.peek() in SQUOTES or self.peek().isdigit()
                ):
                    return Cast(m.group(1), self.parse_unary(), pos=pos)
                self.i = save
                return self.parse_postfix(TypeLit(m.group(1), pos=pos))
        return self.parse_postfix(self.parse_primary())

    def parse_postfix(self, node: Node) -> Node:
        while True:
            pos = self.i
            if self.at("::") or (self.peek() == "." and re.match(r"[A-Za-z_]", self.peek(1))):
                static = self.at("::")
                self.i += 2 if static else 1
                name = self.word()
                if not name:
                    raise ParseError(
                        "Missing property name after the reference operator.", self.i, "MissingPropertyName"
                    )
                self.i += len(name)
                if self.peek() == "(":
                    self.i += 1
                    args = []
                    self.ws_nl()
                    if self.peek() != ")":
                        while True:
                            self.ws_nl()
                            args.append(self.parse_expression(comma=False))
                            self.ws_nl()
                            if self.peek() == ",":
                                self.i += 1
                                continue
                            break
                    self.expect(")")
                    node = Call(node, name, args, static, pos=pos)
                else:
                    node = Member(node, name, static, pos=pos)
            elif self.peek() == "[":
                self.i += 1
                self.ws_nl()
                idx = self.parse_expression()
                self.expect("]")
                node = Index(node, idx, pos=pos)
            else:
                return node

    def parse_primary(self) -> Node:
        ch = self.peek()
        pos = self.i
        if ch in SQUOTES:
            return Str(self._single_quoted(), pos=pos)
        if ch == '"':
            return self._double_quoted()
        if ch == "$":
            if self.peek(1) == "(":
                self.i += 2
                body = self.parse_script(")")
                self.expect(")")
                return SubExpr(body, pos=pos)
            return self._variable()
        if ch == "@" and self.peek(1) == "{":
            self.i += 2
            pairs = []
            while True:
                while True:
                    self.ws_nl()
                    if self.peek() == ";":
                        self.i += 1
                    else:
                        break
                if self.peek() == "}":
                    self.i += 1
                    return Hash(pairs, pos=pos)
                if self.peek() in SQUOTES:
                    key = self._single_quoted()
                else:
                    key = self.word()
                    if not key:
                        raise ParseError(
                            "Missing key before '=' in hash literal.", self.i, "MissingEqualsInHashLiteral"
                        )
                    self.i += len(key)
                self.ws()
                if self.peek() != "=":
                    raise ParseError(
                        "Missing '=' operator after key in hash literal.",
                        self.i,
                        "MissingEqualsInHashLiteral",
                    )
                self.i += 1
                self.ws_nl()
                pairs.append((key, self.parse_pipeline_statement()))
        if ch == "@" and self.peek(1) == "(":
            self.i += 2
            body = self.parse_script(")")
            self.expect(")")
            return SubExpr(body, array=True, pos=pos)
        if ch == "(":
            self.i += 1
            self.ws_nl()
            inner = self.parse_pipeline_statement()
            self.expect(")")
            return Paren(inner, pos=pos)
        if ch == "{":
            self.i += 1
            body = self.parse_script("}")
            self.expect("}")
            return Block(body, pos=pos)
        m = re.compile(r"\d+(\.\d+)?").match(self.s, self.i)
        if m:
            self.i = m.end()
            return Num(float(m.group(0)) if m.group(1) else int(m.group(0)), pos=pos)
        if ch == "[":
            return self.parse_unary()
        raise ParseError(
            f"Unexpected token '{ch if ch != EOF else 'end of input'}' in expression or statement.", self.i
        )

    def _single_quoted(self) -> str:
        self.i += 1
        buf = []
        while True:
            if self.i >= len(self.s):
                raise ParseError(
                    "The string is missing the terminator: '.", self.i, "TerminatorExpectedAtEndOfString"
                )
            ch = self.s[self.i]
            if ch in SQUOTES:
                if self.peek(1) and self.peek(1) in SQUOTES:
                    buf.append(ch)
                    self.i += 2
                    continue
                self.i += 1
                return "".join(buf)
            buf.append(ch)
            self.i += 1

    def _var_name(self) -> str:
        if self.peek() == "{":
            end = self.s.index("}", self.i)
            name = self.s[self.i + 1 : end]
            self.i = end + 1
            return name
        m = re.compile(r"(?:(env|global|script|local):)?([A-Za-z_]\w*|\?|\$)").match(self.s, self.i)
        if not m:
            raise ParseError("Variable reference is not valid.", self.i, "InvalidVariableReference")
        self.i = m.end()
        return m.group(0)

    def _variable(self) -> Var:
        pos = self.i
        self.i += 1
        return Var(self._var_name(), pos=pos)

    def _double_quoted(self) -> Node:
        pos = self.i
        self.i += 1
        parts: list = []
        buf: list[str] = []
        while True:
            if self.i >= len(self.s):
                raise ParseError(
                    'The string is missing the terminator: ".', self.i, "TerminatorExpectedAtEndOfString"
                )
            ch = self.s[self.i]
            if ch == '"':
                if self.peek(1) == '"':
                    buf.append('"')
                    self.i += 2
                    continue
                self.i += 1
                break
            if ch == "`" and self.i + 1 < len(self.s):
                nxt = self.s[self.i + 1]
                buf.append({"n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "e": "\x1b"}.get(nxt, nxt))
                self.i += 2
                continue
            if ch == "$" and self.peek(1) == "(":
                if buf:
                    parts.append("".join(buf))
                    buf = []
                p2 = self.i
                self.i += 2
                body = self.parse_script(")")
                self.expect(")")
                parts.append(SubExpr(body, pos=p2))
                continue
            if ch == "$" and re.match(r"[A-Za-z_{?]", self.peek(1)):
                if buf:
                    parts.append("".join(buf))
                    buf = []
                parts.append(self._variable())
                continue
            buf.append(ch)
            self.i += 1
        if buf:
            parts.append("".join(buf))
        if all(isinstance(p, str) for p in parts):
            return Str("".join(parts), pos=pos)
        return Expand(parts, pos=pos)


def parse(script: str) -> list:
    """Statements of ``script``; raises ParseError."""
    p = Parser(script)
    out = p.parse_script()
    return out


def walk(nodes: Any):
    """Every AST node under ``nodes`` (a list, a node, or a tuple of them), depth first."""
    if isinstance(nodes, (list, tuple)):
        for n in nodes:
            yield from walk(n)
    elif isinstance(nodes, Node):
        yield nodes
        for value in vars(nodes).values():
            if isinstance(value, (Node, list, tuple)):
                yield from walk(value)
