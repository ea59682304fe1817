"""Tests of edgelab.artifacts."""
