"""Shared pytest configuration.

Hypothesis profiles (select with the ``HYPOTHESIS_PROFILE`` environment variable):

- ``ci`` (default): 60 examples, derandomized so that every run checks the same cases.
- ``dev``: 300 random examples, for hunting counterexamples locally.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
