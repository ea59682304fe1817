"""Tests of edgelab.store."""
