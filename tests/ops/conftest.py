"""Fixtures of the op tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def every_op_recorded():
    """(the kernel launches, the launcher calls) that ``test_sm90_compile._exercise_every_op`` makes on the CPU, in
    the interpreter: ``test_sm90_compile._record_launches``'s dict and ``test_launch._record_launcher_calls``'s calls
    (each with its real arguments), both recorded in one run. Made once a session (once a pytest-xdist worker) for
    the three tests that read them (the sm_90 builds, the launchers' opcheck, their decomposition under AOTAutograd),
    which each ran the whole exercise again (about 10 s in the interpreter). Request it after a test's own skips."""
    from tests.ops.test_launch import _record_launcher_calls
    from tests.ops.test_sm90_compile import _exercise_every_op, _record_launches

    with pytest.MonkeyPatch.context() as monkeypatch:
        launches = _record_launches(monkeypatch)
        calls = _record_launcher_calls(monkeypatch)
        _exercise_every_op("cpu")
    return launches, list(calls.values())
