"""Operator actions the screens start in worker threads: probe, check, reserve, trust. Plain functions,
no Textual.

Each returns (ok, one line for the operator) and never raises for a device that is down:
the outcome is stored in the database by the domain layer, and the screens re-read it.
"""

from __future__ import annotations

from sqlalchemy import Engine

from edgelab.errors import EdgelabError


def probe(engine: Engine, name: str, *, timeout: float = 60.0) -> tuple[bool, str]:
    from edgelab.inventory.probe import probe_device

    try:
        snap = probe_device(engine, name, timeout=timeout)
    except EdgelabError as err:
        return False, f"{name}: {err}" + (f" -> {err.remedy}" if err.remedy else "")
    if snap.ok:
        return (
            True,
            f"{name}: probed, class {snap.device_class or '?'} ({snap.catalog_entry or 'no catalog entry'})",
        )
    return False, f"{name}: probe failed: {snap.error}"


def reserve(engine: Engine, name: str, *, ttl_s: float = 1800.0) -> tuple[bool, str]:
    """Lease ``name`` for the operator (30 min by default); refused naming the holder."""
    from edgelab.lease import acquire

    try:
        lease = acquire(engine, names=[name], ttl_s=ttl_s, purpose="reserved in the TUI")
    except EdgelabError as err:
        return False, f"{err}" + (f" -> {err.remedy}" if err.remedy else "")
    return True, f"{name}: reserved (lease {lease.id}) until {lease.expires_at:%H:%M:%S} UTC"


def release(engine: Engine, name: str) -> tuple[bool, str]:
    """End the operator's lease on ``name`` (someone else's is refused, naming them)."""
    from edgelab.lease import holders_by_device
    from edgelab.lease import release as end
    from edgelab.store.db import session_scope
    from edgelab.store.devices import get_device

    try:
        with session_scope(engine, write=False) as s:
            lease = holders_by_device(s, [get_device(s, name)]).get(name)
        if lease is None:
            return False, f"{name} is not leased"
        end(engine, lease.id)
    except EdgelabError as err:
        return False, f"{err}" + (f" -> {err.remedy}" if err.remedy else "")
    return True, f"{name}: lease {lease.id} released"


def check(engine: Engine, names: list[str] | None, *, timeout: float = 5.0) -> tuple[bool, str]:
    from edgelab.inventory.check import check_and_record

    try:
        results = check_and_record(engine, names, timeout=timeout)
    except EdgelabError as err:
        return False, f"{err}" + (f" -> {err.remedy}" if err.remedy else "")
    if len(results) == 1:
        r = results[0]
        return r.online, f"{r.name}: {r.state}" + (f" ({r.detail})" if r.detail else "")
    online = sum(1 for r in results if r.online)
    return online == len(results), f"checked {len(results)} devices: {online} online"


def host_key(engine: Engine, name: str, *, timeout: float = 5.0):
    """(offer, None) with the next host key to trust on the way to ``name``, or (None, why not)."""
    from edgelab.inventory.trust import fetch_offer

    try:
        return fetch_offer(engine, name, timeout=timeout), None
    except EdgelabError as err:
        return None, f"{name}: {err}" + (f" -> {err.remedy}" if err.remedy else "")


def trust(engine: Engine, offer) -> tuple[bool, str]:
    """Record ``offer`` as trusted (a changed key is refused: that takes `device trust --replace`)."""
    from edgelab.inventory.trust import accept_offer

    try:
        accept_offer(engine, offer)
    except EdgelabError as err:
        return False, f"{err}" + (f" -> {err.remedy}" if err.remedy else "")
    if offer.via:
        return True, f"trusted lab host {offer.via} ({offer.fingerprint}); press t again for the next key"
    return True, f"{offer.name}: trusted {offer.key_type} {offer.fingerprint}"
