"""Inventory: turning operator input (addresses, ssh configs, adb servers) into device rows, and the
operations on those devices: check, trust, probe (``inventory.probe``), retire."""
