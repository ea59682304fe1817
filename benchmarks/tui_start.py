"""Time to first paint of the fleet screen with 200 devices in a temporary database.

First paint = the app is started headless and the fleet table holds every device row.
Prints the number (seconds); not part of the test suite.

    python benchmarks/tui_start.py [--devices 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from tui_seed import NOW, seed  # noqa: E402

from edgelab.store.db import dispose_engines, get_engine  # noqa: E402
from edgelab.tui.app import EdgelabApp  # noqa: E402
from edgelab.tui.screens.fleet import FleetScreen  # noqa: E402
from edgelab.tui.widgets.fleet_table import FleetTable  # noqa: E402


async def first_paint(db: str, n: int) -> float:
    app = EdgelabApp(get_engine(db), clock=lambda: NOW)
    start = time.perf_counter()
    async with app.run_test(size=(160, 50)) as pilot:
        while True:
            screen = app.screen
            if isinstance(screen, FleetScreen) and screen.query_one(FleetTable).row_count == n:
                break
            await pilot.pause(0.001)
        await pilot.pause()  # let the frame with the rows render
        elapsed = time.perf_counter() - start
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        seed(get_engine(db), args.devices)
        times = [asyncio.run(first_paint(db, args.devices)) for _ in range(args.repeat)]
        dispose_engines()
    print(
        f"fleet screen first paint with {args.devices} devices: median {statistics.median(times):.3f} s "
        f"(runs: {', '.join(f'{t:.3f}' for t in times)})"
    )


if __name__ == "__main__":
    main()
