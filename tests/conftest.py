"""Shared test settings: hypothesis profiles (CI runs the same number of examples), and
the ``no_wall_clock`` fixture."""

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("default")


@pytest.fixture
def no_wall_clock(monkeypatch):
    """Plan on the nominal budget alone: the planning deadline's default clock
    (``gridcoll.tune.deadline.CLOCK``) stands still, so a loaded machine cannot cut a
    plan short. For the tests of what a budget chooses when it is not under pressure;
    the deadline itself is tested with explicit clocks (``tests/test_tune.py``)."""
    from gridcoll.tune import deadline

    monkeypatch.setattr(deadline, "CLOCK", lambda: 0.0)
