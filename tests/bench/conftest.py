"""Fixtures of the benchmark tests."""

from __future__ import annotations

import pytest

from tests.helpers import use_few_timed_calls


@pytest.fixture
def few_timed_calls(monkeypatch):
    """Every CPU timing of the test two calls, no warm-up (``tests.helpers.use_few_timed_calls``)."""
    use_few_timed_calls(monkeypatch)
