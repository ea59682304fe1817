"""Tests of edgelab.probe, and of edgelab.profile, derived from its facts (a tests/profile package
would shadow the standard library's profile module: tests/ is first on sys.path)."""
