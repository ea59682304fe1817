"""Device leases: who may use which device, until when; kept in the database, no daemon (DESIGN §8)."""

from edgelab.lease.owner import Holder, whoami
from edgelab.lease.service import (
    AUTO_TTL_S,
    acquire,
    get_lease,
    holders_by_device,
    kick,
    list_leases,
    physical_key,
    release,
    renew,
    sweep,
)
from edgelab.lease.use import Use, begin_use, end_use, held, pin, unpin

__all__ = ["AUTO_TTL_S", "Holder", "Use", "acquire", "begin_use", "end_use",
           "get_lease", "held", "holders_by_device", "kick", "list_leases", "physical_key", "pin", "release",
           "renew", "sweep", "unpin", "whoami"]
