"""Tests of edgelab.bench."""
