"""Tests of edgelab.cli."""
