"""Tests of edgelab.lease."""
