"""A paced reference workload sleeps while it waits for its pace: CPU per produced audio second.

Measured from the process's own CPU counters (/proc/PID/stat utime+stime) between its first audio
chunk and its last, so start-up is not counted; a CPU-time bound, never a wall-clock one. Spinning
BLAS worker threads made this 0.2-0.24 CPU-s per audio second; sleeping, it is about 0.025.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (a zombie keeps them until reaped)


@pytest.mark.slow
def test_paced_reference_tts_sleeps_between_frames():
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edgelab.reference",
            "tts",
            "--frames-per-s",
            "12.5",
            "--frames",
            "60",
            "--requests",
            "2",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    start = end = None
    audio = 0
    try:
        for line in proc.stdout:
            e = json.loads(line)
            if e["kind"] == "audio.chunk":
                if start is None:
                    start = _cpu_s(proc.pid)  # from the first chunk on: steady state only
                else:
                    audio += e["samples"]
            elif e["kind"] == "run.end":
                end = _cpu_s(proc.pid)
    finally:
        proc.wait(60)
    assert proc.returncode == 0 and start is not None and end is not None
    audio_s = audio / 24000
    per_s = (end - start) / audio_s
    print(
        f"reference tts at 12.5 frames/s: {end - start:.2f} CPU-s for {audio_s:.1f} s of audio "
        f"= {per_s:.3f} CPU-s per audio second"
    )
    assert audio_s > 8
    assert per_s < 0.1, per_s  # spinning was 0.2+; the work itself is ~0.025
