"""Tests of edgelab.catalog."""
