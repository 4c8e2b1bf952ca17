"""Helpers the test files share (tests import them from here, never from another test file)."""
