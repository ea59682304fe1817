"""Pack parts of the edgelab package into a reproducible Python zipapp (the reference runtime).

Same sources give the same bytes (fixed timestamps, sorted entries), so the artifact hash only
moves when the code does. ``python3 app.pyz ARGS`` and ``PYTHONPATH=app.pyz python3 -m
edgelab.reference ARGS`` both work on a device with Python 3.10+ (and numpy for the workloads).

    python -m edgelab.runtimes.pack OUT.pyz --main edgelab.reference PATH...
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding edgelab/
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _files(include: list[str]) -> list[Path]:
    out: set[Path] = set()
    for rel in include:
        p = (PACKAGE_ROOT / rel).resolve()
        if not p.is_relative_to(PACKAGE_ROOT / "edgelab"):
            raise SystemExit(f"pack: {rel} is not inside the edgelab package")
        if p.is_dir():
            out.update(f for f in p.rglob("*.py") if "__pycache__" not in f.parts)
        elif p.is_file():
            out.add(p)
        else:
            raise SystemExit(f"pack: {rel} does not exist under {PACKAGE_ROOT}")
    return sorted(out)


def pack(out: Path, include: list[str], main: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        entry = f"import runpy\nrunpy.run_module({main!r}, run_name='__main__', alter_sys=True)\n"
        info = zipfile.ZipInfo("__main__.py", _EPOCH)
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, entry)
        for f in _files(include):
            info = zipfile.ZipInfo(f.relative_to(PACKAGE_ROOT).as_posix(), _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, f.read_bytes())
    return out


def main(argv: list[str] | None = None) -> int:
    from edgelab import logs

    ap = argparse.ArgumentParser(prog="python -m edgelab.runtimes.pack")
    logs.add_argument(ap)
    ap.add_argument("out", type=Path)
    ap.add_argument("include", nargs="+", help="paths relative to the package root, e.g. edgelab/reference")
    ap.add_argument("--main", required=True, help="module run by `python3 app.pyz`")
    args = ap.parse_args(argv)
    logs.setup(args.log_level)
    pack(args.out, args.include, args.main)
    return 0


if __name__ == "__main__":
    sys.exit(main())
