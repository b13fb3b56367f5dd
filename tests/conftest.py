"""Hypothesis profiles: `ci` (the default: fixed seeds, a few hundred examples per property, so a CI run
is the same every time) and `fuzz` (HYPOTHESIS_PROFILE=fuzz pytest -m fuzz: random seeds, thousands of
examples, for a long run on a developer's machine)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fuzz", max_examples=5000, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
