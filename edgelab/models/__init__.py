"""Model files edgelab makes itself: random-weight stages exported to exchange formats (no imports here)."""
