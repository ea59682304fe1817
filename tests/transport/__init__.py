"""Tests of edgelab.transport."""
