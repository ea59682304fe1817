"""Admission: which pools a plan reserves, and processes racing for the last GiB (SQLite and PostgreSQL)."""

from __future__ import annotations

import multiprocessing as mp
from types import SimpleNamespace

import pytest

from edgelab.deploy.admission import GIB, HOST_SHARE, admit, pool_requests, spread
from edgelab.deploy.plan import ExecutionPlan, ProcessSpec, StagePlan
from edgelab.errors import Refusal
from edgelab.profile.budget import Pool
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.deployments import open_reservations
from edgelab.store.devices import add_device, get_device
from edgelab.store.models import Device


def _profile(pools: list[Pool], budget: str, headroom: int = 2 * GIB):
    return SimpleNamespace(
        pools=pools,
        budget_pool=next(p for p in pools if p.name == budget),
        defaults=SimpleNamespace(headroom_bytes=headroom),
    )


def _plan(placement: str, request: int, pool: str, argv: list[str] | None = None) -> ExecutionPlan:
    backend = {"gpu": "cuda", "cpu": "cpu", "npu": "qnn"}[placement]
    return ExecutionPlan(
        pipeline="p",
        device="d",
        strategy="S3",
        runtime="llama.cpp",
        reason="test",
        stages=[StagePlan("lm", "lm", "llama.cpp", backend, placement)],
        processes=[ProcessSpec("server", argv or ["llama-server"])],
        memory={pool: request},
    )


RAM = Pool("ram", "ram", 32 * GIB, "facts")
VRAM = Pool("vram:rtx5090", "vram", 24 * GIB, "facts")
COMMIT = Pool("commit", "commit", 48 * GIB, "facts")
WSL = Pool("wsl_quota", "wsl_quota", 16 * GIB, "facts")


def test_a_gpu_plan_reserves_vram_and_its_host_share_and_windows_commit():
    prof = _profile([RAM, VRAM, COMMIT], "vram:rtx5090")
    got, why = pool_requests(_plan("gpu", 6 * GIB, "vram:rtx5090"), prof)
    assert got == {"vram:rtx5090": 6 * GIB, "ram": HOST_SHARE, "commit": HOST_SHARE}
    assert set(why) == set(got)


def test_a_cpu_only_plan_reserves_no_vram():
    prof = _profile([RAM, VRAM, COMMIT], "vram:rtx5090")
    got, _ = pool_requests(_plan("cpu", 6 * GIB, "vram:rtx5090"), prof)
    assert got == {"ram": 6 * GIB, "commit": 6 * GIB}
    assert not any(k.startswith("vram") for k in got)


def test_inside_wsl_the_host_pool_is_the_quota():
    prof = _profile([WSL, VRAM], "vram:rtx5090")
    assert pool_requests(_plan("gpu", 4 * GIB, "vram:rtx5090"), prof)[0] == {
        "vram:rtx5090": 4 * GIB,
        "wsl_quota": HOST_SHARE,
    }
    prof = _profile([WSL], "wsl_quota")
    assert pool_requests(_plan("cpu", 4 * GIB, "wsl_quota"), prof)[0] == {"wsl_quota": 4 * GIB}


def test_unified_memory_is_one_pool_and_vllm_reserves_the_fraction_it_is_told():
    jetson = _profile([Pool("ram", "ram", 64 * GIB, "facts")], "ram", headroom=3 * GIB)
    plan = _plan("gpu", int(2.3 * GIB), "ram", ["vllm", "serve", "m", "--gpu-memory-utilization", "0.80"])
    got, why = pool_requests(plan, jetson)
    assert got == {"ram": int(0.80 * 64 * GIB)}
    assert "0.8" in why["ram"]


def _device(url: str) -> None:
    with session_scope(get_engine(url)) as s:
        add_device(s, Device(name="b1", transport="ssh", ssh_host="127.0.0.1", ssh_port=2222))


def _admit_one(url: str, i: int, q) -> None:
    dbmod.dispose_engines()
    prof = _profile([Pool("ram", "ram", int(4.44 * GIB) + GIB, "facts")], "ram", headroom=GIB)
    try:
        with session_scope(get_engine(url)) as s:
            admit(s, get_device(s, "b1"), prof, _plan("cpu", int(4.40 * GIB), "ram"), run_id=f"r{i}")
        q.put((i, None))
    except Refusal as r:
        q.put((i, r.pool))


@pytest.mark.slow  # real processes racing: 30-35 s here
def test_processes_racing_for_the_last_gib_admit_exactly_one(db_url):
    _device(db_url)
    dbmod.dispose_engines()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_admit_one, args=(db_url, i, q)) for i in range(4)]
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(pool for _, pool in got if pool) == ["ram", "ram", "ram"]
    assert len([i for i, pool in got if pool is None]) == 1
    with session_scope(get_engine(db_url), write=False) as s:
        rows = open_reservations(s, get_device(s, "b1").id)
    assert len(rows) == 1 and rows[0].bytes == int(4.40 * GIB)


def test_a_refusal_names_the_pool_and_the_numbers(db_url):
    _device(db_url)
    prof = _profile([RAM, COMMIT], "ram")
    with session_scope(get_engine(db_url)) as s:
        admit(s, get_device(s, "b1"), prof, spread(_plan("cpu", 20 * GIB, "ram"), prof), run_id="r1")
    with pytest.raises(Refusal) as err, session_scope(get_engine(db_url)) as s:
        admit(s, get_device(s, "b1"), prof, spread(_plan("cpu", 20 * GIB, "ram"), prof), run_id="r2")
    r = err.value
    assert r.pool == "ram" and "20.00 GiB reserved + 20.00 GiB requested > 30.00 GiB capacity" in str(r)
    with session_scope(get_engine(db_url), write=False) as s:  # all or nothing: no commit row for r2 either
        rows = open_reservations(s, get_device(s, "b1").id)
    assert sorted((x.run_id, x.pool) for x in rows) == [("r1", "commit"), ("r1", "ram")]
