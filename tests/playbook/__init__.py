"""Tests of edgelab.playbook."""
