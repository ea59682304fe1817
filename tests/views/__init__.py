"""Tests of edgelab.views."""
