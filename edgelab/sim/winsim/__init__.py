"""The Windows side of the virtual lab: a PowerShell subset interpreter and a cmd.exe shim.

Stdlib only, imported by the persona shims (``python -I -S``) as the top-level package ``winsim``
and by tests as ``edgelab.sim.winsim``; modules import each other relatively for that reason.
"""
