"""Shared pytest set-up: make tests/support and the collection (by its name, through the checkout's
.collections link that make setup creates) importable."""

import os
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(os.path.dirname(TESTS), ".collections"))
