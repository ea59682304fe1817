"""Inventory: turning operator input (addresses, ssh configs, adb servers) into device rows, and checking them."""
