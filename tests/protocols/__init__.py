"""Tests of edgelab.protocols."""
