"""Shared test settings: hypothesis profiles (CI runs the same number of examples)."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("default")
