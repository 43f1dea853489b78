"""Test configuration shared by every test file.

* ``@pytest.mark.gpu`` tests are skipped ("needs CUDA") when no CUDA device is present;
* ``@pytest.mark.long`` tests (minutes on CI's two cores, or a pair of processes for a minute) are collected first;
* the ``requires_triton`` fixture skips a test unless ops on CPU tensors run the Triton kernels
  (in the interpreter: ``TRITON_INTERPRET=1`` must be set before Python starts);
* the ``device`` fixture is ``"cuda"`` when available, else ``"cpu"``;
* ``every_op_recorded``: the kernel launches and launcher calls of ``test_sm90_compile._exercise_every_op``, made
  once a worker.
"""

from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    # ``@pytest.mark.long`` tests first (a stable sort): pytest-xdist hands each worker its share in this order, so a
    # test of several minutes starts at once on one worker while the others share the rest, instead of starting
    # last and being the run's tail (CI: 2 workers; the sm_90 build test started 21 minutes into a 31-minute run).
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
    if torch.cuda.is_available():
        return
    needs_cuda = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(needs_cuda)


@pytest.fixture
def requires_triton(device):
    """Skip unless the ops run their Triton kernels on ``device`` (use with
    ``@pytest.mark.usefixtures("requires_triton")``)."""
    from blockfuse.runtime import use_triton

    if not use_triton(torch.empty(0, device=device)):
        pytest.skip(
            "needs the Triton path: on CPU set TRITON_INTERPRET=1 before Python starts "
            "(without it CPU tensors use the pure-PyTorch reference)"
        )


@pytest.fixture(scope="session")
def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="session")
def every_op_recorded():
    """(the kernel launches, the launcher calls) that ``test_sm90_compile._exercise_every_op`` makes on the CPU, in
    the interpreter: ``test_sm90_compile._record_launches``'s dict and ``test_launch._record_launcher_calls``'s calls
    (each with its real arguments), both recorded in one run. Made once a session (once a pytest-xdist worker) for
    the four tests that read them (the sm_90 builds, the launchers' opcheck, their decomposition under AOTAutograd,
    benchmarks/sass_digest.py's), which each ran the whole exercise again (about 10 s in the interpreter). Request it
    after a test's own skips."""
    from tests.ops.test_launch import _record_launcher_calls
    from tests.ops.test_sm90_compile import _exercise_every_op, _record_launches

    with pytest.MonkeyPatch.context() as monkeypatch:
        launches = _record_launches(monkeypatch)
        calls = _record_launcher_calls(monkeypatch)
        _exercise_every_op("cpu")
    return launches, list(calls.values())
