"""Reference qwen3-tts: a random-weight talker and code2wav decoder with the real chunk schedule.

Shapes and timing follow the pipeline (DESIGN §4/§5): 16 codebooks of 2048 entries at 12.5 Hz,
24 kHz audio, 1920 samples per frame, a 72-frame decoder left context, and either the server
schedule (1 frame, then 25) or the edge ramp (2, 4, 8, 16, 25). The talker is paced to a chosen
frames/s so the first-chunk stall of 1 -> 25 versus the ramp shows in real arrival times.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 24000
FRAME_RATE_HZ = 12.5
SAMPLES_PER_FRAME = 1920  # 24000 / 12.5
CODEBOOKS = 16
CODEBOOK_SIZE = 2048
LEFT_CONTEXT = 72
SCHEDULES: dict[str, tuple[int, ...]] = {"server": (1, 25), "ramp": (2, 4, 8, 16, 25)}
CHARS_PER_SECOND = 14.0  # speaking rate used to size a request from its text

BAND_TEXTS = {
    "short": "The lab is ready.",
    "medium": "Edge devices stream audio in chunks; the first chunk decides how soon the listener hears a voice.",
    "long": (
        "A device lab measures what a model really does on the hardware it ships on: how soon the first "
        "audio arrives, whether playback ever stalls, how fast it runs against real time, and how hot and "
        "how hungry the device gets while it works. Every number keeps the facts it was measured under."
    ),
}


def schedule_of(name_or_sizes: str | Sequence[int]) -> tuple[int, ...]:
    """A schedule by name ('server', 'ramp') or a literal list like '2,4,8'; the last size repeats."""
    if isinstance(name_or_sizes, str):
        if name_or_sizes in SCHEDULES:
            return SCHEDULES[name_or_sizes]
        try:
            sizes = tuple(int(x) for x in name_or_sizes.split(","))
        except ValueError:
            sizes = ()
    else:
        sizes = tuple(int(x) for x in name_or_sizes)
    if not sizes or any(s < 1 for s in sizes):
        from edgelab.errors import ConfigError

        raise ConfigError(
            f"bad chunk schedule {name_or_sizes!r}",
            remedy="use 'server', 'ramp' or positive frame counts like '2,4,8,16,25'",
        )
    return sizes


def chunk_sizes(schedule: Sequence[int], total_frames: int) -> list[int]:
    """Frame counts of each chunk for ``total_frames``: the schedule, its last size repeated, the tail cut."""
    out: list[int] = []
    left = total_frames
    i = 0
    while left > 0:
        n = min(schedule[min(i, len(schedule) - 1)], left)
        out.append(n)
        left -= n
        i += 1
    return out


def frames_for_text(text: str) -> int:
    """Codec frames a text takes at a plain speaking rate (at least one)."""
    return max(1, round(len(text) / CHARS_PER_SECOND * FRAME_RATE_HZ))


def _seed_of(*parts: object) -> int:
    h = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


def with_left_context(codes: np.ndarray, context: np.ndarray | None) -> tuple[np.ndarray, int]:
    """``codes`` [T, 16] checked, with up to 72 earlier frames of ``context`` before them, and T:
    what every code2wav decoder (this one, a runtime's exported graph) is fed."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != CODEBOOKS:
        raise ValueError(f"codes must be [T, {CODEBOOKS}], got {codes.shape}")
    t_new = codes.shape[0]
    if context is not None and len(context):
        codes = np.concatenate([np.asarray(context)[-LEFT_CONTEXT:], codes])
    return codes, t_new


class CodecDecoder:
    """code2wav: codebook embeddings, two causal convolutions, two upsampling layers to 1920 samples/frame.

    Decoding with left context reproduces what the pipeline's decoder does: the context frames
    feed the causal convolutions, only the new frames' samples come out.
    """

    def __init__(self, seed: int = 0, dim: int = 64):
        rng = np.random.default_rng(_seed_of("code2wav", seed))
        self.dim = dim
        self.emb = rng.standard_normal((CODEBOOKS, CODEBOOK_SIZE, dim), dtype=np.float32) / np.sqrt(CODEBOOKS)
        self.conv1 = rng.standard_normal((3 * dim, dim), dtype=np.float32) / np.sqrt(3 * dim)
        self.conv2 = rng.standard_normal((3 * dim, dim), dtype=np.float32) / np.sqrt(3 * dim)
        self.up1 = rng.standard_normal((dim, 8 * 32), dtype=np.float32) / np.sqrt(dim)
        self.up2 = rng.standard_normal((32, SAMPLES_PER_FRAME // 8), dtype=np.float32) / np.sqrt(32)
        self._cb = np.arange(CODEBOOKS)

    @staticmethod
    def _causal(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        z = np.zeros((2, x.shape[1]), dtype=x.dtype)
        p = np.concatenate([z, x])
        stacked = np.concatenate([p[2:], p[1:-1], p[:-2]], axis=1)  # x_t, x_{t-1}, x_{t-2}
        return np.tanh(stacked @ w)

    def decode(self, codes: np.ndarray, context: np.ndarray | None = None) -> np.ndarray:
        """int16 PCM for ``codes`` [T, 16]; ``context`` [C, 16] are earlier frames (only the last 72 used)."""
        codes, t_new = with_left_context(codes, context)
        idx = np.clip(codes.astype(np.int64), 0, CODEBOOK_SIZE - 1)
        x = self.emb[self._cb, idx].sum(axis=1)  # [T, dim]
        x = self._causal(x, self.conv1)
        x = x + self._causal(x, self.conv2)
        x = x[-t_new:]
        h = np.tanh((x @ self.up1).reshape(t_new * 8, 32))
        y = np.tanh(h @ self.up2).reshape(t_new * SAMPLES_PER_FRAME)
        return (y * 0.5 * 32767).astype(np.int16)


class Talker:
    """A tiny random-weight LM: one recurrent step per codec frame, 16 codebooks sampled per step."""

    def __init__(self, seed: int = 0, dim: int = 64):
        rng = np.random.default_rng(_seed_of("talker", seed))
        self.seed = seed
        self.dim = dim
        self.w_h = rng.standard_normal((dim, dim), dtype=np.float32) / np.sqrt(dim)
        self.text_emb = rng.standard_normal((256, dim), dtype=np.float32)
        self.code_emb = rng.standard_normal((CODEBOOKS, CODEBOOK_SIZE, dim), dtype=np.float32) / CODEBOOKS
        self.w_out = rng.standard_normal((dim, CODEBOOKS * CODEBOOK_SIZE), dtype=np.float32)

    def frames(
        self,
        text: str,
        n_frames: int,
        *,
        frames_per_s: float | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[np.ndarray]:
        """Codec frames [16] int16, one per step; paced so frame k is ready no earlier than (k+1)/fps."""
        rng = np.random.default_rng(_seed_of("sample", self.seed, text))
        tokens = np.frombuffer(text.encode("utf-8") or b" ", dtype=np.uint8)
        cond = self.text_emb[tokens]  # text front-end: byte embeddings
        h = np.tanh(cond.mean(axis=0))
        prev = np.zeros(CODEBOOKS, dtype=np.int64)
        cb = np.arange(CODEBOOKS)
        t0 = time.monotonic()
        for k in range(n_frames):
            if stop is not None and stop.is_set():
                return
            x = self.code_emb[cb, prev].sum(axis=0) + cond[k % len(cond)]
            h = np.tanh(h @ self.w_h + x)
            logits = (h @ self.w_out).reshape(CODEBOOKS, CODEBOOK_SIZE)
            logits = logits + rng.gumbel(size=logits.shape).astype(np.float32)
            prev = logits.argmax(axis=1)
            if frames_per_s:
                delay = t0 + (k + 1) / frames_per_s - time.monotonic()
                if delay > 0:
                    if stop is not None:
                        if stop.wait(delay):
                            return
                    else:
                        time.sleep(delay)
            yield prev.astype(np.int16)


def chunked(frames: Iterator[np.ndarray], schedule: Sequence[int], total_frames: int) -> Iterator[np.ndarray]:
    """Group a frame stream into the schedule's chunks [n, 16] as soon as each is complete.

    The talker runs in its own thread (as the pipeline's stages do), so decoding a chunk does
    not delay the next frames.
    """
    q: queue.Queue[np.ndarray | None | BaseException] = queue.Queue()

    def produce() -> None:
        try:
            for f in frames:
                q.put(f)
        except BaseException as err:  # surfaced in the consumer
            q.put(err)
        finally:
            q.put(None)

    th = threading.Thread(target=produce, name="talker", daemon=True)
    th.start()
    done = False
    for n in chunk_sizes(schedule, total_frames):
        got: list[np.ndarray] = []
        while len(got) < n:
            item = q.get()
            if item is None:
                done = True
                break
            if isinstance(item, BaseException):
                raise item
            got.append(item)
        if got:
            yield np.stack(got)
        if done:
            return


@dataclass
class Chunk:
    """One decoded audio chunk: its PCM, the frames it covers and when each stage ran (monotonic s)."""

    idx: int
    pcm: np.ndarray
    n_frames: int
    decode_start: float
    decode_end: float

    @property
    def samples(self) -> int:
        return int(self.pcm.shape[0])

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.pcm.tobytes()).hexdigest()


class ReferenceTTS:
    """Talker + code2wav, streaming PCM chunks on the chosen schedule."""

    def __init__(
        self,
        *,
        frames_per_s: float | None = 25.0,
        schedule: str | Sequence[int] = "ramp",
        seed: int = 0,
        talker: Talker | None = None,
        decoder: CodecDecoder | None = None,
    ):
        self.frames_per_s = frames_per_s
        self.schedule = schedule_of(schedule)
        self.seed = seed
        self.talker = talker or Talker(seed)  # pass loaded models to share them across requests
        self.decoder = decoder or CodecDecoder(seed)

    def stream(
        self,
        text: str,
        *,
        n_frames: int | None = None,
        stop: threading.Event | None = None,
        on_codes: Callable[[np.ndarray], None] | None = None,
    ) -> Iterator[Chunk]:
        """Decoded chunks of ``text`` as they are ready; ``stop`` ends it early (cancel)."""
        total = n_frames if n_frames is not None else frames_for_text(text)
        own_stop = stop if stop is not None else threading.Event()
        frames = self.talker.frames(text, total, frames_per_s=self.frames_per_s, stop=own_stop)
        context: np.ndarray | None = None
        try:
            for i, codes in enumerate(chunked(frames, self.schedule, total)):
                if on_codes is not None:
                    on_codes(codes)
                t0 = time.monotonic()
                pcm = self.decoder.decode(codes, context)
                t1 = time.monotonic()
                context = codes if context is None else np.concatenate([context, codes])[-LEFT_CONTEXT:]
                yield Chunk(idx=i, pcm=pcm, n_frames=int(codes.shape[0]), decode_start=t0, decode_end=t1)
                if own_stop.is_set():
                    return
        finally:
            if stop is None:
                own_stop.set()  # an abandoned stream stops its talker thread
