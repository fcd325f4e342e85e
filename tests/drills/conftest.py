"""Drills (make drills): minutes-long exercises of the real estate under load whose figures are committed in
tests/drills/results/. Each builds the test bed it needs."""
