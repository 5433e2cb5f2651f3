"""Shared test settings: hypothesis runs without deadlines (shared, noisy machines), and the
persistent cost store is off (every test computes what it checks; the store's own tests turn
it on in a temporary folder). CLI subprocesses inherit the setting."""

import os

from hypothesis import HealthCheck, settings

os.environ["INFERSIM_CACHE"] = "off"

settings.register_profile(
    "ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")
