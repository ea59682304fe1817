"""Reference internvla-a1: a random-weight observation encoder and flow-matching action head.

One observation (camera images, robot state, prompt) gives one action chunk of horizon x dims
(50 x 32) after 10 Euler steps of a learned-velocity flow from Gaussian noise, as the real head
does. The compute is real numpy on random weights; the actions mean nothing.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

HORIZON = 50
DIMS = 32
FLOW_STEPS = 10
IMAGE_SIZE = 224
STATE_DIMS = 8  # DROID-like: 7 joints + gripper


def _seed_of(*parts: object) -> int:
    h = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


class ObservationEncoder:
    """Images -> 16x16 patch means -> linear; state and prompt bytes -> linear; summed to one embedding."""

    def __init__(self, seed: int = 0, dim: int = 128, patch: int = 16):
        rng = np.random.default_rng(_seed_of("obs-encoder", seed))
        self.dim = dim
        self.patch = patch
        self.w_patch = rng.standard_normal((3, dim), dtype=np.float32) / np.sqrt(3)
        self.w_state = rng.standard_normal((STATE_DIMS, dim), dtype=np.float32) / np.sqrt(STATE_DIMS)
        self.text_emb = rng.standard_normal((256, dim), dtype=np.float32) / 4

    def encode(self, obs: dict[str, Any]) -> np.ndarray:
        parts: list[np.ndarray] = []
        for _key, value in sorted(obs.items()):
            arr = np.asarray(value) if not isinstance(value, str) else None
            if arr is not None and arr.ndim == 3 and arr.shape[-1] == 3:  # an HxWx3 camera image
                h, w = (arr.shape[0] // self.patch) * self.patch, (arr.shape[1] // self.patch) * self.patch
                img = arr[:h, :w].astype(np.float32) / 255.0
                patches = img.reshape(h // self.patch, self.patch, w // self.patch, self.patch, 3).mean(
                    axis=(1, 3)
                )
                parts.append(np.tanh(patches.reshape(-1, 3) @ self.w_patch).mean(axis=0))
        state = obs.get("state", obs.get("observation/joint_position"))
        if state is not None:
            s = np.zeros(STATE_DIMS, dtype=np.float32)
            flat = np.asarray(state, dtype=np.float32).reshape(-1)[:STATE_DIMS]
            s[: flat.shape[0]] = flat
            parts.append(np.tanh(s @ self.w_state))
        prompt = obs.get("prompt")
        if isinstance(prompt, str) and prompt:
            parts.append(self.text_emb[np.frombuffer(prompt.encode()[:48], dtype=np.uint8)].mean(axis=0))
        if not parts:
            return np.zeros(self.dim, dtype=np.float32)
        return np.sum(parts, axis=0).astype(np.float32)


class FlowActionHead:
    """Velocity network v(x, tau, obs) integrated from noise by ``steps`` Euler steps."""

    def __init__(
        self,
        seed: int = 0,
        *,
        horizon: int = HORIZON,
        dims: int = DIMS,
        steps: int = FLOW_STEPS,
        obs_dim: int = 128,
        hidden: int = 256,
    ):
        rng = np.random.default_rng(_seed_of("flow-head", seed))
        self.horizon, self.dims, self.steps = horizon, dims, steps
        self.w_in = rng.standard_normal((dims, hidden), dtype=np.float32) / np.sqrt(dims)
        self.w_obs = rng.standard_normal((obs_dim, hidden), dtype=np.float32) / np.sqrt(obs_dim)
        self.w_tau = rng.standard_normal((hidden,), dtype=np.float32)
        self.pos = rng.standard_normal((horizon, hidden), dtype=np.float32) / 4
        self.mix = rng.standard_normal((horizon, horizon), dtype=np.float32) / np.sqrt(horizon)
        self.w_out = rng.standard_normal((hidden, dims), dtype=np.float32) / np.sqrt(hidden)

    def velocity(self, x: np.ndarray, tau: float, obs_emb: np.ndarray) -> np.ndarray:
        h = _gelu(x @ self.w_in + obs_emb @ self.w_obs + tau * self.w_tau + self.pos)
        h = h + np.tanh(self.mix @ h)  # mixing across the horizon
        return h @ self.w_out

    def sample(self, obs_emb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = rng.standard_normal((self.horizon, self.dims)).astype(np.float32)
        dt = 1.0 / self.steps
        for k in range(self.steps):
            x = x + dt * self.velocity(x, k * dt, obs_emb)
        return x


class ReferenceVLA:
    """Encoder + flow head: ``infer(obs)`` returns ``{"actions": [horizon, dims]}`` like an OpenPI policy.

    ``slow_every``/``slow_ms`` inject a pause into every N-th inference so deadline misses can be shown.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        horizon: int = HORIZON,
        dims: int = DIMS,
        steps: int = FLOW_STEPS,
        slow_every: int = 0,
        slow_ms: float = 0.0,
    ):
        self.encoder = ObservationEncoder(seed)
        self.head = FlowActionHead(seed, horizon=horizon, dims=dims, steps=steps, obs_dim=self.encoder.dim)
        self.rng = np.random.default_rng(_seed_of("flow-noise", seed))
        self.slow_every = slow_every
        self.slow_ms = slow_ms
        self.calls = 0

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "runtime": "reference",
            "weights": "random",
            "pipeline": "internvla-a1",
            "image_resolution": [IMAGE_SIZE, IMAGE_SIZE],
            "cameras": ["base_0_rgb", "left_wrist_0_rgb"],
            "action_space": {"horizon": self.head.horizon, "dims": self.head.dims},
            "flow_steps": self.head.steps,
        }

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        emb = self.encoder.encode(obs)
        actions = self.head.sample(emb, self.rng)
        if self.slow_every and self.calls % self.slow_every == 0 and self.slow_ms > 0:
            time.sleep(self.slow_ms / 1000.0)  # the injected slow step
        return {"actions": actions}

    def reset(self) -> None:
        self.rng = np.random.default_rng(_seed_of("flow-noise-reset", self.calls))


def synthetic_observation(rng: np.random.Generator, prompt: str = "pick up the red cube") -> dict[str, Any]:
    """A camera pair, a robot state and a prompt, as a robot client would send them."""
    return {
        "base_0_rgb": rng.integers(0, 256, (IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8),
        "left_wrist_0_rgb": rng.integers(0, 256, (IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8),
        "state": rng.standard_normal(STATE_DIMS).astype(np.float32),
        "prompt": prompt,
    }
