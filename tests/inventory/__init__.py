"""Tests of edgelab.inventory."""
