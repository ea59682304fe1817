"""The OpenPI robot endpoint: the reference VLA served by ``openpi-server``, measured with ``openpi-client``.

The wire format (WebSocket, msgpack with numpy arrays, metadata first) belongs to those
packages; this module only adapts the reference policy to it, runs the server on a loopback
port, and turns a client's control loop into action-chunk events.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import warnings
from typing import Any

import numpy as np
from openpi_client.base_policy import BasePolicy
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from openpi_server import WebsocketPolicyServer

from edgelab.credentials import mask_text
from edgelab.errors import TransportError
from edgelab.metrics.events import RunStart
from edgelab.protocols.serving import check_loopback
from edgelab.reference import PROVENANCE
from edgelab.reference.emit import Emitter
from edgelab.reference.vla import ReferenceVLA, synthetic_observation
from edgelab.reference.vla_run import episode


class ReferencePolicy(BasePolicy):
    """The reference VLA behind OpenPI's policy interface; ``{"endpoint": "reset"}`` resets it."""

    def __init__(self, vla: ReferenceVLA | None = None):
        self.vla = vla or ReferenceVLA()
        self.resets = 0

    def infer(self, obs: dict) -> dict:
        if obs.get("endpoint") == "reset":
            self.reset()
            return {"reset": True, "actions": np.zeros((0, self.vla.head.dims), dtype=np.float32)}
        return self.vla.infer(obs)

    def reset(self) -> None:
        self.resets += 1
        self.vla.reset()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class OpenPIServer:
    """``openpi_server.WebsocketPolicyServer`` on a loopback port in a background thread."""

    def __init__(
        self,
        policy: BasePolicy | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        metadata: dict[str, Any] | None = None,
    ):
        check_loopback(host)
        self.policy = policy or ReferencePolicy()
        if metadata is None:  # the reference policy describes itself (runtime reference, weights random)
            vla = getattr(self.policy, "vla", None)
            metadata = getattr(vla, "metadata", None) or (dict(PROVENANCE) if vla is not None else {})
        self.metadata: dict[str, Any] = metadata
        self.host = host
        self.port = port
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._error: BaseException | None = None

    def start(self, timeout: float = 30.0) -> OpenPIServer:
        fixed = self.port is not None
        for _attempt in range(1 if fixed else 5):
            if not fixed:
                self.port = _free_port(self.host)  # the port might be taken again before bind: retried
            self._error = None
            started = threading.Event()
            self._thread = threading.Thread(
                target=self._main, args=(started,), name="openpi-server", daemon=True
            )
            self._thread.start()
            started.wait(timeout)
            if self._wait_listening(timeout):
                return self
            self.stop()
        raise TransportError(
            f"openpi server did not start on {self.host}:{self.port}: {self._error}",
            remedy="check the port is free",
        )

    def _main(self, started: threading.Event) -> None:
        async def go() -> None:
            self._loop = asyncio.get_running_loop()
            server = WebsocketPolicyServer(
                self.policy, host=self.host, port=self.port, metadata=self.metadata
            )
            self._task = asyncio.current_task()
            started.set()
            await server.run()

        try:
            asyncio.run(go())
        except asyncio.CancelledError:
            pass
        except BaseException as err:
            self._error = err
        finally:
            started.set()

    def _wait_listening(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._thread is None or not self._thread.is_alive():
                return False
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    return True
            except OSError:
                time.sleep(0.02)
        return False

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def stop(self) -> None:
        """Cancel the server task (closing the listener and connections) and join its thread."""
        if self._loop is not None and self._task is not None and self._thread is not None:
            if self._thread.is_alive():
                self._loop.call_soon_threadsafe(self._task.cancel)
            self._thread.join(30)

    def __enter__(self) -> OpenPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def observation_for(
    schema: str,
    rng: np.random.Generator,
    prompt: str = "pick up the red cube",
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A synthetic observation in the key layout an OpenPI policy of that robot expects
    (openpi's examples: DROID, ALOHA, LIBERO), or the reference VLA's own layout.

    The server's metadata shapes it where it says: ``image_resolution`` (H, W) sizes the camera
    images, ``needs_session_id`` adds a session id (vLLM-Omni's robot endpoint asks both)."""
    meta = metadata or {}
    res = meta.get("image_resolution")
    hw = (int(res[0]), int(res[1])) if isinstance(res, (list, tuple)) and len(res) == 2 else (224, 224)

    def img(shape: tuple[int, ...]) -> np.ndarray:
        return rng.integers(0, 256, shape, dtype=np.uint8)

    if schema == "droid":  # two exterior cameras and a wrist camera, 7 joints + gripper
        obs = {
            "observation/exterior_image_1_left": img((*hw, 3)),
            "observation/exterior_image_2_left": img((*hw, 3)),
            "observation/wrist_image_left": img((*hw, 3)),
            "observation/joint_position": rng.standard_normal(7).astype(np.float32),
            "observation/gripper_position": rng.random(1).astype(np.float32),
            "prompt": prompt,
        }
    elif schema == "aloha":
        obs = {
            "state": rng.standard_normal(14).astype(np.float32),
            "images": {cam: img((3, *hw)) for cam in ("cam_high", "cam_left_wrist", "cam_right_wrist")},
            "prompt": prompt,
        }
    elif schema == "libero":
        obs = {
            "observation/image": img((*hw, 3)),
            "observation/wrist_image": img((*hw, 3)),
            "observation/state": rng.standard_normal(8).astype(np.float32),
            "prompt": prompt,
        }
    elif schema == "reference":
        obs = synthetic_observation(rng, prompt)
    else:
        raise ValueError(f"unknown observation layout {schema!r} (droid, aloha, libero, reference)")
    if meta.get("needs_session_id"):
        obs["session_id"] = "edgelab-bench"
    return obs


OBSERVATIONS = ("droid", "aloha", "libero", "reference")


class OpenPIClient:
    """``openpi_client.WebsocketClientPolicy`` with the lab's reset and close."""

    def __init__(self, host: str, port: int | None = None):
        try:
            with warnings.catch_warnings():  # the package connects without a context manager; we close it
                warnings.simplefilter("ignore", DeprecationWarning)
                self._policy = WebsocketClientPolicy(host=host, port=port)
        except OSError as err:
            raise TransportError(
                mask_text(f"cannot reach the OpenPI endpoint {host}{f':{port}' if port else ''}: {err}"),
                remedy="check the policy server is running",
            ) from err

    @property
    def metadata(self) -> dict[str, Any]:
        return self._policy.get_server_metadata()

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        """One inference; a server that answers a bare action array (vLLM-Omni's robot endpoint)
        gives ``{"actions": array}`` like openpi-server's dict."""
        out = self._policy.infer(obs)
        return out if isinstance(out, dict) else {"actions": np.asarray(out)}

    def reset(self) -> None:
        """``endpoint: reset`` (the package's own reset() sends nothing): openpi-server hands it to
        the policy and answers a dict; vLLM-Omni's robot endpoint answers the text "reset successful"."""
        ws = self._policy._ws  # the package exposes no raw send; its own packer keeps the wire format
        ws.send(self._policy._packer.pack({"endpoint": "reset"}))
        reply = ws.recv()
        if isinstance(reply, str) and "reset successful" not in reply:
            raise TransportError(
                f"the OpenPI endpoint refused the reset: {reply[:300]}",
                remedy="check the server's log; this server may not support reset",
            )

    def close(self) -> None:
        ws = getattr(self._policy, "_ws", None)  # the package exposes no close()
        if ws is not None:
            ws.close()

    def __enter__(self) -> OpenPIClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_openpi_loop(
    em: Emitter,
    client: OpenPIClient,
    *,
    control_hz: float = 10.0,
    steps: int = 20,
    seed: int = 0,
    device: str | None = None,
) -> int:
    """A robot's control loop against an OpenPI endpoint, as action-chunk events measured here."""
    period = 1.0 / control_hz
    rng = np.random.default_rng(seed)
    meta = client.metadata
    em.emit(
        RunStart(
            t=time.time(),
            pipeline=meta.get("pipeline"),
            device=device,
            runtime=meta.get("runtime"),
            meta={"endpoint": "openpi", "server": meta, "control_hz": control_hz, "control_period_s": period},
        )
    )
    return episode(em, client.infer, period_s=period, steps=steps, rng=rng)
