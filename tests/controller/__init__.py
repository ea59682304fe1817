"""Tests of edgelab.controller."""
