"""``python -m edgelab.sim.adb_emulator --state-dir DIR --device s25=s25:5586 [--device x=s24:5590:auth]``.

Writes ``emulator.pid`` in the state dir once every port listens, removes it
on exit; SIGTERM and SIGINT stop it cleanly (running commands are killed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from edgelab import logs
from edgelab.sim.adb_emulator.device import load_spec
from edgelab.sim.adb_emulator.server import serve
from edgelab.sim.adb_emulator.shell import kill_all


def parse_device(text: str) -> tuple[str, str, int, bool]:
    """``NAME=PERSONA:PORT[:auth]``."""
    name, sep, rest = text.partition("=")
    fields = rest.split(":")
    if not sep or len(fields) not in (2, 3) or (len(fields) == 3 and fields[2] != "auth"):
        raise argparse.ArgumentTypeError(f"expected NAME=PERSONA:PORT[:auth], got {text!r}")
    port = int(fields[1])
    if 5555 <= port <= 5585:
        raise argparse.ArgumentTypeError("ports 5555-5585 are scanned by adb itself; use 5586 or above")
    return name, fields[0], port, len(fields) == 3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m edgelab.sim.adb_emulator", description=__doc__)
    ap.add_argument("--state-dir", type=Path, required=True)
    ap.add_argument("--device", type=parse_device, action="append", required=True)
    ap.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level debug")
    logs.add_argument(ap)
    args = ap.parse_args(argv)
    logs.setup("debug" if args.verbose else args.log_level, default="info")
    state = args.state_dir.resolve()
    state.mkdir(parents=True, exist_ok=True)
    specs = [load_spec(n, p, port, state, require_auth=auth) for n, p, port, auth in args.device]
    pid_file = state / "emulator.pid"

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        def ready() -> None:
            tmp = pid_file.with_suffix(".tmp")
            tmp.write_text(f"{os.getpid()}\n")
            os.replace(tmp, pid_file)

        await serve(specs, stop, ready)

    try:
        asyncio.run(run())
    except OSError as e:
        print(f"adb emulator: {e}", file=sys.stderr)
        return 1
    finally:
        kill_all()
        try:
            if pid_file.read_text().strip() == str(os.getpid()):
                pid_file.unlink()
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
