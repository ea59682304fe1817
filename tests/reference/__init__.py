"""Tests of edgelab.reference."""
