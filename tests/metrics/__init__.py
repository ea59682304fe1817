"""Tests of edgelab.metrics."""
