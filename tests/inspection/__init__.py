"""Tests of ``dragoman.inspect`` (not ``tests/inspect``: that name would shadow the standard library's ``inspect``)."""
