"""Tests of edgelab.adapters."""
