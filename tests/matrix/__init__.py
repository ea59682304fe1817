"""Tests of edgelab.matrix."""
