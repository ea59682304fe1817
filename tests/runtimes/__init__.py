"""Tests of edgelab.runtimes."""
