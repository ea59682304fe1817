"""ONNX -> MNN through the converter's extension (``_tools.mnnconvert``), in a guarded child process.

Never through MNN's ``mnnconvert`` console script or ``MNN.tools``: that wrapper imports
``MNN.tools.utils.log``, which pip-installs a logging SDK and sends a conversion log (with
/etc/machine-id) to an outside host. The extension itself is the C++ converter. It runs in a
child process (its C++ prints go to that child's stdout, a crash cannot take the caller down),
and the child installs an audit hook first that refuses any non-loopback connect and any pip
start, so a future wheel that adds telemetry to the extension fails loudly instead of phoning home.

``python -m edgelab.models.mnn_convert SRC.onnx DST.mnn`` is the child's entry point.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from pathlib import Path

from edgelab.errors import ConvertError

FORBIDDEN_PROGRAMS = ("pip", "pip3", "uv")


def _loopback(address: object) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
    elif isinstance(address, (str, bytes)):
        return True  # an AF_UNIX path: local by construction
    else:
        return False
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name: refused (no resolver lookups on our behalf)


def _is_pip(argv: object) -> bool:
    words = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv or [])
    text = " ".join(os.fsdecode(w) if isinstance(w, (bytes, os.PathLike)) else str(w) for w in words)
    parts = text.replace("/", " ").split()
    return any(p in FORBIDDEN_PROGRAMS or p.startswith("pip3.") for p in parts) or " -m pip" in f" {text}"


def guard(event: str, args: tuple) -> None:
    """sys.addaudithook callback: no outside connection, no pip, however the converter tries."""
    if event in ("socket.connect", "socket.sendto") and len(args) >= 2 and not _loopback(args[1]):
        raise PermissionError(f"edgelab: blocked {event} to {args[1]!r} during MNN conversion")
    if event == "subprocess.Popen" and len(args) >= 2 and _is_pip(args[1]):
        raise PermissionError(f"edgelab: blocked starting pip during MNN conversion: {args[1]!r}")
    if event == "os.system" and args and _is_pip(args[0]):
        raise PermissionError(f"edgelab: blocked os.system pip during MNN conversion: {args[0]!r}")
    if event == "import" and args and str(args[0]).startswith(("MNN.tools", "aliyun")):
        raise PermissionError(f"edgelab: blocked import of {args[0]} (MNN's telemetry wrapper)")


def convert(src: Path, dst: Path, *, biz_code: str = "edgelab", timeout: float = 600.0) -> str:
    """Convert ``src`` (ONNX) to ``dst`` (MNN); returns the converter's output. Raises ConvertError."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".part")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("http_", "https_", "HTTP_", "HTTPS_"))}
    p = subprocess.run(
        [sys.executable, "-m", "edgelab.models.mnn_convert", str(src), str(tmp), "--biz-code", biz_code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    out = (p.stdout + p.stderr).strip()
    if p.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        raise ConvertError(f"MNN conversion of {src.name} failed (exit {p.returncode}): {out[-400:]}")
    os.replace(tmp, dst)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    sys.addaudithook(guard)  # first: before the extension is even imported
    from edgelab import logs

    ap = argparse.ArgumentParser(prog="python -m edgelab.models.mnn_convert", description=__doc__)
    logs.add_argument(ap)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--biz-code", default="edgelab")
    a = ap.parse_args(argv)
    logs.setup(a.log_level)
    import _tools  # MNN's converter extension; deliberately not MNN.tools

    _tools.mnnconvert(
        ["mnnconvert", "-f", "ONNX", "--modelFile", a.src, "--MNNModel", a.dst, "--bizCode", a.biz_code]
    )
    return 0 if Path(a.dst).is_file() else 1


if __name__ == "__main__":
    sys.exit(main())
