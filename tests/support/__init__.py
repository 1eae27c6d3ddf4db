"""Helpers shared by agentenv's own tests (not part of the package)."""
