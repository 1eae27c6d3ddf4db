"""Helpers that test modules import (not tests themselves): the tiny local chat model."""
