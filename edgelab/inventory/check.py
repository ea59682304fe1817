"""Reachability of many devices at once: each through its own transport's ``check``, in parallel.

Results are written to the database by the calling thread as they arrive, one short
transaction each, so a slow device never holds a lock that others wait on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass

from sqlalchemy import Engine

from edgelab.store.db import session_scope
from edgelab.store.devices import get_device, list_devices, record_state
from edgelab.store.models import Device
from edgelab.transport.base import Endpoint


@dataclass(frozen=True)
class CheckResult:
    name: str
    transport: str
    state: str  # online | offline | untrusted | auth-failed | unauthorized | absent | error
    detail: str | None
    duration_s: float

    @property
    def online(self) -> bool:
        return self.state == "online"

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "transport": self.transport,
            "state": self.state,
            "detail": self.detail,
            "duration_s": round(self.duration_s, 3),
        }


def check_endpoint(endpoint: Endpoint, timeout: float = 5.0) -> tuple[str, str | None]:
    """(state, detail) for one endpoint; never raises for an unreachable device."""
    from edgelab.transport import check

    try:
        return check(endpoint, timeout=timeout)
    except Exception as err:  # a check must report, not crash the whole sweep
        return "error", f"{type(err).__name__}: {err}"


def check_devices(
    devices: Sequence[Device],
    *,
    timeout: float = 5.0,
    max_workers: int = 32,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Check all ``devices`` in parallel; ``on_result`` runs in the caller's thread as each finishes."""
    if not devices:
        return []
    targets = [(d.name, d.transport, d.endpoint()) for d in devices]
    results: dict[str, CheckResult] = {}

    def one(name: str, kind: str, endpoint: Endpoint) -> CheckResult:
        start = time.monotonic()
        state, detail = check_endpoint(endpoint, timeout)
        return CheckResult(name, kind, state, detail, time.monotonic() - start)

    pool = ThreadPoolExecutor(max_workers=min(max_workers, len(targets)), thread_name_prefix="edgelab-check")
    futures = {pool.submit(one, *t): t for t in targets}
    try:
        # Each check has its own timeout; this bound only guards against a check that ignores it.
        for fut in as_completed(futures, timeout=timeout * 3 + 10):
            res = fut.result()
            results[res.name] = res
            if on_result:
                on_result(res)
    except FuturesTimeout:
        for name, kind, _ in futures.values():
            if name not in results:
                res = CheckResult(name, kind, "offline", f"no answer within {timeout * 3 + 10:.0f} s", 0.0)
                results[name] = res
                if on_result:
                    on_result(res)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return [results[name] for name, _, _ in targets]


def check_and_record(
    engine: Engine,
    names: Sequence[str] | None = None,
    *,
    timeout: float = 5.0,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Check the named devices (all when ``names`` is None) and record state, detail and times."""
    with session_scope(engine, write=False) as s:
        devices = list_devices(s) if names is None else [get_device(s, n) for n in dict.fromkeys(names)]

    def record(res: CheckResult) -> None:
        with session_scope(engine) as s:
            record_state(s, res.name, res.state, res.detail)
        if on_result:
            on_result(res)

    return check_devices(devices, timeout=timeout, on_result=record)
