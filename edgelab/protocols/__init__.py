"""Protocol clients that measure runs from the lab side, and lab-side servers that speak the same
protocols (backed by the reference runtime) so the clients are tested against real sockets.

Servers bind loopback only. See DESIGN §5a for the wire protocols.
"""
