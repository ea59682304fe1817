"""Tests of edgelab.models."""
