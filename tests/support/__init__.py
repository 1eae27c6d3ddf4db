"""Helpers that test modules import (not tests themselves)."""
