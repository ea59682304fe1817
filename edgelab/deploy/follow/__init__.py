"""Follow a deployment's output into the metrics store: one follower per run, resumable.

A deployed process writes edgelab events as JSON lines to ``stdout.log`` in its run directory on
the device. A follower reads that file from a byte offset through the transport, corrects the
device clock, feeds the metrics Ingestor (raw samples, live summary, log lines) and ends when
the deployment ends, writing the final summary recomputed from the raw samples. A deployment
that serves llama-server writes no events: its follower drives requests at it from the lab.

Only one follower ingests a run: it holds a lease in ``run.meta["follower"]`` (owner, its pid,
host and start time, heartbeat, byte offset, clock offset). The offset is written in the same
transaction as the samples it covers, so a follower that dies loses nothing and duplicates
nothing: the next one (after the lease expires, or at once when the dead one is proven gone on
this host) replays the log up to the offset into its live aggregator only, and stores from there
on. Who starts one, in which form, and what replaces a dead one is
:mod:`edgelab.deploy.supervise` (the follower as a service).

By concept, bottom up:

- :mod:`.lease`: the lease in the database (take it, who holds it, a follower's failure);
- :mod:`.target`: what to follow (the event log, or the server) and how to reach the device;
- :mod:`.heartbeat`: when the device last answered, and what a silence means (device-lost);
- :mod:`.reader`: reading the device's log from the stored offset; :mod:`.drivers`: driving a server;
- :mod:`.follower`: one follower (``Follower``), from its lease to the run's final summary;
- :mod:`.process`: a follower in a thread or a detached process with its own log file
  (``python -m edgelab.deploy.follow RUN``).
"""

from edgelab.deploy.follow.follower import POLL_S, Follower
from edgelab.deploy.follow.heartbeat import BACKOFF_MAX_S, LOSS_S
from edgelab.deploy.follow.lease import LEASE_S, follower_alive, lease_of, owner_id, record_failure
from edgelab.deploy.follow.process import FollowerThread, ensure_follower, log_path, main, spawn_detached
from edgelab.deploy.follow.target import READ_TIMEOUT_S

__all__ = [
    "BACKOFF_MAX_S",
    "LEASE_S",
    "LOSS_S",
    "POLL_S",
    "READ_TIMEOUT_S",
    "Follower",
    "FollowerThread",
    "ensure_follower",
    "follower_alive",
    "lease_of",
    "log_path",
    "main",
    "owner_id",
    "record_failure",
    "spawn_detached",
]
