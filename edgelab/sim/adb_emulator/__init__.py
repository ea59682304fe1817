"""An ADB device emulator: the far end of `adb connect`, so the real adb server has devices to manage.

One asyncio process serves several virtual devices, one TCP port each. Shell
commands become real processes on the lab host (inside the persona), and the
sync service reads and writes a per-device directory.
"""

from edgelab.sim.adb_emulator.device import DeviceSpec, load_spec

__all__ = ["DeviceSpec", "load_spec"]
