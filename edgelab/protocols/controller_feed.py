"""A real engine behind the lab-side speech server: edgelab's S3 controller over llama.cpp, as a child.

The controller (``s3-controller --serve --pcm``, runtimes/s3-controller) takes one request per JSON
line on its stdin and answers with edgelab events on its stdout, each audio chunk carrying its
s16le PCM in base64. :class:`ControllerTTS` keeps one such process for a server (its model loaded
once, as a real server does), sends it one utterance at a time, yields the PCM of each chunk as it
is decoded, and cancels an utterance by writing ``cancel`` (what ``input.cancel``, or a client
that hangs up, asks for). The speech server (:mod:`edgelab.protocols.speech_ws`) streams those
bytes to vLLM-Omni's own clients exactly as it streams the reference's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import queue
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgelab.errors import ConfigError, EdgelabError

READY_S = 300.0  # loading a real-geometry model on a slow host takes a while
IDLE_S = 600.0  # the longest the controller may stay silent inside an utterance


@dataclass
class ControllerSpec:
    """How to start the controller: its program and llama.cpp's flags (model, mmproj, threads, ...)."""

    program: Path
    model: Path
    mmproj: Path
    threads: int | None = None
    ctx: int = 2048
    extra: Sequence[str] = ()

    def argv(self) -> list[str]:
        out = [str(self.program), "-m", str(self.model), "--mmproj", str(self.mmproj), "-c", str(self.ctx)]
        out += ["-t", str(self.threads)] if self.threads else []
        return [*out, *self.extra, "--serve", "--pcm", "--run", "speech-server"]


class ControllerTTS:
    """One controller process serving utterances in turn (thread-safe: a lock around each)."""

    def __init__(self, spec: ControllerSpec):
        for what, path in (("controller", spec.program), ("talker", spec.model), ("mmproj", spec.mmproj)):
            if not Path(path).is_file():
                raise ConfigError(
                    f"no {what} at {path}",
                    remedy="edgelab runtime build llama.cpp --target linux-x86_64 and edgelab model synth qwen3-tts-0.6b",
                )
        self.spec = spec
        self._lock = threading.Lock()
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._n = 0
        self.start_info: dict[str, Any] = {}
        self.proc = subprocess.Popen(
            spec.argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=self._read, name="controller-stdout", daemon=True).start()
        first = self._next(READY_S)
        while first is not None and first.get("kind") not in ("run.start", "error", "run.end", "timeout"):
            first = self._next(READY_S)
        if first is None or first.get("kind") != "run.start":
            self.close()
            raise EdgelabError(
                f"the S3 controller did not start: {first.get('message') if first else 'it exited'}",
                remedy=f"run it by hand to see llama.cpp's log: {' '.join(spec.argv())}",
            )
        self.start_info = first.get("meta") or {}

    @property
    def provenance(self) -> dict[str, Any]:
        """What the server states in every audio.start: the runtime and that the weights are random."""
        return {"runtime": "llama.cpp", "weights": "random", "engine": "s3-controller"}

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                self._events.put(ev)
        self._events.put(None)

    def _next(self, timeout: float) -> dict[str, Any] | None:
        """The next event; None once the controller exited; ``{"kind": "timeout"}`` after ``timeout``."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return {"kind": "timeout", "message": f"no event from the controller within {timeout:g} s"}

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as err:
            raise EdgelabError(f"the S3 controller is gone ({err})") from err

    def stream(
        self,
        text: str,
        *,
        frames: int,
        seed: int | None = None,
        schedule: str | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[bytes]:
        """The utterance's PCM, chunk by chunk (checked against the SHA-256 the controller sent);
        ``stop`` set cancels it: the controller ends the utterance and the iterator ends."""
        with self._lock:
            self._n += 1
            rid = f"speech-{self._n}"
            req: dict[str, Any] = {"request": rid, "text": text, "frames": int(frames), "pcm": True}
            if seed is not None:
                req["seed"] = int(seed)
            if schedule:
                req["schedule"] = schedule
            self._send(json.dumps(req))
            cancelled, quiet = False, 0.0
            while True:
                if stop is not None and stop.is_set() and not cancelled:
                    self._send("cancel")
                    cancelled = True
                wait = 0.1 if stop is not None and not cancelled else IDLE_S  # poll the stop flag
                ev = self._next(wait)
                if ev is None:
                    raise EdgelabError("the S3 controller exited in the middle of an utterance")
                kind = ev.get("kind")
                if kind == "timeout":
                    quiet += wait
                    if quiet >= IDLE_S:
                        raise EdgelabError(f"the S3 controller sent nothing for {IDLE_S:g} s")
                    continue
                quiet = 0.0
                if kind == "error" and ev.get("request") in (rid, None):
                    raise EdgelabError(f"the S3 controller failed: {ev.get('message')}")
                if ev.get("request") != rid:
                    continue
                if kind == "audio.chunk" and ev.get("pcm"):
                    data = base64.b64decode(ev["pcm"])
                    if hashlib.sha256(data).hexdigest() != ev.get("sha256"):
                        raise EdgelabError(f"chunk {ev.get('idx')} of {rid}: PCM does not match its SHA-256")
                    if not cancelled:
                        yield data
                elif kind == "request.end":
                    return

    def close(self) -> None:
        """End the controller: EOF on its stdin ends its serve loop; killed if it lingers."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


__all__ = ["ControllerSpec", "ControllerTTS"]
