"""Tests of edgelab.deploy."""
