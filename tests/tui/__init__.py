"""Tests of edgelab.tui."""
