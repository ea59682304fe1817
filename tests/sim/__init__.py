"""Tests of edgelab.sim."""
