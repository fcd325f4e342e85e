"""Shared pytest set-up: make tests/support importable and fail loudly in CI instead of skipping."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
