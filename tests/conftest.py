"""Shared test settings: hypothesis runs without deadlines (shared, noisy machines)."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")
