"""OpenPI endpoint: the reference VLA served by openpi-server, driven by openpi-client."""

from __future__ import annotations

import io
import socket

import numpy as np
import pytest

from edgelab.metrics.action import ActionSample, action_metrics
from edgelab.metrics.events import ActionChunk, RunStart
from edgelab.protocols.openpi import OpenPIClient, OpenPIServer, ReferencePolicy, run_openpi_loop
from edgelab.reference.emit import Emitter
from edgelab.reference.vla import ReferenceVLA, synthetic_observation


def test_client_gets_a_50x32_chunk_metadata_and_reset():
    with OpenPIServer() as srv:
        with OpenPIClient("127.0.0.1", srv.port) as client:
            meta = client.metadata
            assert meta["action_space"] == {"horizon": 50, "dims": 32}
            assert meta["runtime"] == "reference" and meta["weights"] == "random"
            out = client.infer(synthetic_observation(np.random.default_rng(0)))
            assert out["actions"].shape == (50, 32) and out["actions"].dtype == np.float32
            assert out["server_timing"]["infer_ms"] > 0
            # the served policy computed it: same weights and noise locally give the same chunk
            local = ReferenceVLA().infer(synthetic_observation(np.random.default_rng(0)))["actions"]
            assert np.allclose(out["actions"], local)
            client.reset()
            assert srv.policy.resets == 1
        port = srv.port
    with pytest.raises(OSError):  # stopped: nothing listens any more
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_control_loop_over_the_wire_shows_the_slow_step_as_deadline_misses():
    policy = ReferencePolicy(ReferenceVLA(slow_every=3, slow_ms=250))
    with OpenPIServer(policy) as srv, OpenPIClient("127.0.0.1", srv.port) as client:
        em = Emitter(io.StringIO(), run="op")
        run_openpi_loop(em, client, control_hz=10, steps=6)
    assert isinstance(em.events[0], RunStart) and em.events[0].meta["server"]["weights"] == "random"
    chunks = [e for e in em.events if isinstance(e, ActionChunk)]
    assert [(c.horizon, c.dims) for c in chunks] == [(50, 32)] * 6
    m = action_metrics(
        [
            ActionSample(
                t=c.t, obs_t=c.obs_t, infer_start=c.infer_start, infer_end=c.infer_end, horizon=c.horizon
            )
            for c in chunks
        ],
        period_s=0.1,
    )
    assert m["latency_ms"]["count"] == 6 and m["deadline_misses"] >= 2
    assert all(c.t - c.obs_t > 0.25 for c in chunks if (c.idx + 1) % 3 == 0)
