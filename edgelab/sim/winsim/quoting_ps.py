"""A PowerShell statement that runs one argv (single-quoted words, ``exit $LASTEXITCODE``)."""


def quote(arg: str) -> str:
    return "'" + "".join(c + c if c in "'\u2018\u2019\u201a\u201b" else c for c in arg) + "'"


def native_script(argv: list[str]) -> str:
    return "& " + " ".join(quote(a) for a in argv) + "; exit $LASTEXITCODE"
