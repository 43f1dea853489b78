"""``blockfuse bench model NAME --nproc 2 --parallel fsdp,tp``: the multi-GPU training-step benchmark, run end to
end on two CPU processes over gloo (tiny stack; on two GPUs over NCCL where there are two), its torchrun launch,
its files, and its loss against one process."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from blockfuse.cli import build_parser, main

SRC = Path(__file__).resolve().parents[2] / "src"
LAYERS = 2
COMMAND = ["bench", "model", "standard", "--nproc", "2", "--parallel", "fsdp,tp", "--shape", "2x16x128",
           "--layers", str(LAYERS), "--dtype", "fp32", "--providers", "eager,fused", "--steps", "3", "--warmup", "1",
           "--optimizer", "sgd", "--lr", "0.5", "--profile"]
RECORD_FIELDS = {"parallel", "provider", "mesh", "batch_per_rank", "global_batch", "tokens_per_step", "ms", "p20",
                 "p80", "ms_by_rank", "peak_mib", "peak_mib_by_rank", "tokens_per_s", "losses", "loss", "one_gpu",
                 "loss_rel_diff", "loss_rel_diff_max", "speedup_vs_one_gpu", "communication"}


def _run(out: Path, timeout: float = 150) -> tuple[int, str]:
    """The CLI in a process of its own (it re-launches itself under torchrun); ended with all it started on timeout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(SRC), os.environ.get("PYTHONPATH"))))}
    process = subprocess.Popen([sys.executable, "-m", "blockfuse", *COMMAND, "--out", str(out)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"no result in {timeout} s:\n{output[-3000:]}")
    return process.returncode, output


@pytest.mark.skipif(0 < torch.cuda.device_count() < 2, reason="two processes, one a GPU: needs two GPUs (or none)")
def test_fsdp_and_tp_on_two_processes_match_one(tmp_path):
    code, output = _run(tmp_path)
    assert code == 0, output[-3000:]
    document = json.loads((tmp_path / "model-standard-fsdp_tp-x2.json").read_text())
    meta, workload, records = document["meta"], document["workload"], document["records"]
    assert {"card", "cards", "torch", "triton", "command", "device", "date"} <= set(meta)
    assert len(meta["cards"]) == 2 and workload["nproc"] == 2
    assert meta["command"].startswith(shlex.join(["blockfuse", "bench", "model", "standard", "--nproc", "2"]))
    assert [(r["parallel"], r["provider"]) for r in records] == [
        ("fsdp", "eager"), ("fsdp", "fused"), ("tp", "eager"), ("tp", "fused")]
    for record in records:
        case = (record["parallel"], record["provider"])
        assert not record.get("error"), (case, record.get("error"))
        assert RECORD_FIELDS <= set(record), (case, RECORD_FIELDS - set(record))
        data_ranks = 2 if record["parallel"] == "fsdp" else 1
        assert record["mesh"] == {"dp": data_ranks, "tp": 2 // data_ranks}, case
        assert record["global_batch"] == 2 * data_ranks and record["tokens_per_step"] == 2 * data_ranks * 16, case
        assert len(record["ms_by_rank"]) == 2 and record["ms"] == max(record["ms_by_rank"]) > 0, case
        assert record["tokens_per_s"] == pytest.approx(record["tokens_per_step"] / (record["ms"] * 1e-3)), case
        assert len(record["losses"]) == 3 and len(record["one_gpu"]["losses"]) == 3, case
        assert record["one_gpu"]["batch"] == record["global_batch"], case
        # fp32: the sharded step is the one-process step up to summation order
        assert record["loss_rel_diff_max"] < 1e-5, (case, record["losses"], record["one_gpu"]["losses"])
        # teeth: SGD at 0.5 moves the loss far more than that (a step skipped or a gradient not reduced would show)
        losses = record["one_gpu"]["losses"]
        assert abs(losses[-1] - losses[0]) / losses[0] > 1e-2, (case, losses)
    # the profile: the TP plan's all-gathers and no more (a norm that gathered its sequence shard would add two)
    for record in records:
        gathers = sum(e["count"] for e in record["communication"] if e["kind"] == "all_gather")
        assert gathers > 0, record["communication"]
        if record["parallel"] == "tp":
            assert gathers == record["planned_collectives"]["all_gather"] == 4 * LAYERS + 1, record["communication"]
    assert (tmp_path / "trace-tp-fused-rank0.json").exists()
    checks = {t["text"].split(":")[0]: t["status"] for t in document["targets"]}
    assert checks["fsdp fused"] == "met" and checks["tp fused"] == "met", document["targets"]
    text = (tmp_path / "model-standard-fsdp_tp-x2.md").read_text()
    assert meta["command"] in text and f"torch {meta['torch']}" in text and f"triton {meta['triton']}" in text
    assert "## fsdp (dp 2 x tp 1)" in text and "## tp (dp 1 x tp 2)" in text
    assert "| fused |" in text and "Communication in one profiled step" in text
    for record in records:  # the allocator's counts and the state's memory: CUDA only
        assert all((counts is None) != torch.cuda.is_available() for counts in record["allocator_per_step_by_rank"])
        assert all((mib is None) != torch.cuda.is_available() for mib in record["state_mib_by_rank"])


@pytest.mark.parametrize("words, message", [
    (["--steps", "5"], "--steps: for the multi-GPU benchmark"),
    (["--nproc", "2"], "--parallel fsdp|tp|fsdp+tp"),
    (["--nproc", "2", "--parallel", "fsdp,pp"], "--parallel: expected comma-separated names from fsdp,tp,fsdp+tp"),
    (["--nproc", "2", "--parallel", "fsdp+tp", "--tp", "3"], "--tp 3: must divide --nproc 2"),
    (["--nproc", "2", "--parallel", "tp", "--tp", "2"], "--tp is for --parallel fsdp+tp"),
    (["--nproc", "2", "--parallel", "fsdp", "--modes", "fwd"], "--modes is for the single-process benchmark"),
    (["--nproc", "2", "--parallel", "fsdp", "--steps", "3", "--warmup", "3"], "expected 0 <= warmup < steps"),
    (["--nproc", "2", "--parallel", "fsdp", "--providers", "liger"], "--providers: expected comma-separated"),
])
def test_bad_options_are_usage_errors(words, message, capsys):
    assert main(["bench", "model", "standard", *words]) == 2
    assert message in capsys.readouterr().err


def test_the_recorded_command_gives_the_same_settings(tmp_path):
    from blockfuse.bench.distributed import settings as distributed

    args = build_parser().parse_args([*COMMAND, "--tp", "2", "--parallel", "fsdp+tp,tp", "--memory-fraction", "0.5",
                                      "--no-reference", "--out", str(tmp_path)])
    settings = distributed.settings_from(args)
    recorded = shlex.split(distributed.command(settings, tmp_path))
    again = distributed.settings_from(build_parser().parse_args(recorded[1:]))
    assert again == settings
    assert (settings.parallels, settings.tp, settings.reference, settings.memory_fraction) == (
        ("fsdp+tp", "tp"), 2, False, 0.5)


def test_memory_snapshot_option(tmp_path, capsys):
    """``--memory-snapshot`` is spelled out in the recorded command; on a machine without CUDA it is a usage
    error that says why."""
    from dataclasses import replace

    from blockfuse.bench.distributed import settings as distributed

    settings = distributed.settings_from(build_parser().parse_args([*COMMAND, "--parallel", "fsdp"]))
    assert "--memory-snapshot" not in distributed.command(settings, tmp_path)
    assert "--memory-snapshot" in shlex.split(distributed.command(replace(settings, memory_snapshot=True), tmp_path))
    if not torch.cuda.is_available():
        assert main(["bench", "model", "standard", "--nproc", "2", "--parallel", "fsdp", "--memory-snapshot"]) == 2
        assert "--memory-snapshot: records the CUDA caching allocator: needs CUDA" in capsys.readouterr().err


def test_max_batch_search_doubles_then_bisects(tmp_path, monkeypatch):
    """The search's arithmetic, each launch replaced by a stand-in: fused fits up to 5 per GPU, compile up to 2,
    eager not even the first batch (the launches themselves need CUDA: --max-batch refuses the CPU)."""
    from blockfuse.bench.distributed import max_batch
    from blockfuse.bench.distributed.settings import Settings

    largest = {"fused": 5, "compile": 2, "eager": 0}
    tried = []

    def fake(settings, parallel, provider, batch, folder):
        tried.append((provider, batch))
        if batch > largest[provider]:
            return {"error": "OutOfMemoryError: CUDA out of memory"}
        return {"tokens_per_s": 1000.0 * batch, "ms": 10.0, "peak_mib": 100.0 * batch,
                "meta": {"card": "card", "cards": ["card", "card"], "torch": "t", "triton": "tr"}}

    monkeypatch.setattr(max_batch, "try_batch", fake)
    settings = Settings(name="standard", shape=(2, 16, 128), layers=2, dtype="bf16",
                        providers=("compile", "fused", "eager"), parallels=("fsdp",), nproc=2, tp=2,
                        memory_fraction=0.5)
    assert max_batch.search_max_batch(settings, tmp_path) == 0
    assert [b for p, b in tried if p == "fused"] == [2, 4, 8, 6, 5]
    assert [b for p, b in tried if p == "eager"] == [2, 1]
    document = json.loads((tmp_path / "max-batch-standard-x2.json").read_text())
    found = {r["provider"]: r for r in document["results"]}
    assert (found["fused"]["max_batch"], found["fused"]["first_failing_batch"]) == (5, 6)
    assert (found["compile"]["max_batch"], found["eager"]["max_batch"]) == (2, None)
    assert found["fused"]["tokens_per_s"] == 5000.0
    text = (tmp_path / "max-batch-standard-x2.md").read_text()
    assert "| fsdp | fused | 5 | 5000 | 2.50 |" in text and "0.5 of each GPU" in text and "torch t" in text


def test_peak_memory_by_phase_of_a_step(monkeypatch):
    """The training loop reads the allocator's peak after the forward, the backward and the optimizer step, each
    phase's largest over the steps, and the step's peak is the largest of them; and the allocator's cudaMalloc /
    cudaFree / retry counts over the timed steps, a step (fake CUDA counters: no GPU)."""
    from types import SimpleNamespace

    from blockfuse.bench.distributed import training

    readings = iter(mib * 2**20 for mib in (10, 30, 20, 12, 25, 40, 11, 22, 33))  # steps 1-3: fwd, bwd, opt
    resets = []
    counts = iter([{"num_device_alloc": 5, "num_device_free": 1, "num_alloc_retries": 0},  # after the warm-up step
                   {"num_device_alloc": 9, "num_device_free": 5, "num_alloc_retries": 2}])  # after the last
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *args: next(readings))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *args: resets.append(1))
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda *args: next(counts))
    allocated = iter(mib * 2**20 for mib in (7, 9))  # when the two timed steps begin
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *args: next(allocated))
    world = SimpleNamespace(cuda=True, synchronize=lambda: None)
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trained = training.train(
        model, optimizer, lambda i: (torch.randn(2, 3, 4), torch.randn(2, 3, 4)), SimpleNamespace(steps=3, warmup=1),
        world)
    assert trained.phase_peaks == {"forward": 12.0, "backward": 30.0, "optimizer": 40.0} and trained.peak == 40.0
    assert len(trained.losses) == len(trained.times) == 3
    assert len(resets) == 1 + 9  # once before the steps, then after each phase
    # two timed steps; a counter the allocator does not keep counts 0
    assert trained.allocator == {"num_device_alloc": 2.0, "num_device_free": 2.0, "num_alloc_retries": 1.0,
                                 "num_sync_all_streams": 0.0}
    assert trained.state_mib == 9.0  # the largest when a timed step began


def test_the_peak_above_the_state_a_step_begins_with():
    """The Markdown's lines of what each provider's step adds to the memory it begins with (the largest rank's)
    and the ratio to compile's; nothing on the CPU (no figures)."""
    from blockfuse.bench.distributed.tables import _above_state_lines

    records = [{"provider": "compile", "peak_mib_by_rank": [9669, 9600], "state_mib_by_rank": [4289, 4289]},
               {"provider": "fused", "peak_mib_by_rank": [8309, 8250], "state_mib_by_rank": [4273, 4100]}]
    lines = _above_state_lines(records)
    assert lines[-2:] == ["- compile: 5380 MiB (1.00x compile)", "- fused: 4150 MiB (0.77x compile)"]
    assert _above_state_lines([{"provider": "fused", "peak_mib_by_rank": [None, None],
                                "state_mib_by_rank": [None, None]}]) == []


@pytest.mark.skipif(0 < torch.cuda.device_count() < 2, reason="two processes, one a GPU: needs two GPUs (or none)")
def test_fp8_layers_train_under_tensor_parallelism_and_fsdp(tmp_path):
    """``--linear fp8:delayed``: the stack's Linear layers converted before it is sharded (TP and FSDP2), recorded
    in the workload, the file name and the command; the loss near one GPU's (each TP rank scales its own shards:
    not bit for bit, as the fp32 run above is)."""
    words = ["bench", "model", "standard", "--nproc", "2", "--parallel", "tp,fsdp", "--shape", "2x16x128",
             "--layers", "1", "--dtype", "bf16", "--providers", "fused", "--steps", "2", "--warmup", "1",
             "--optimizer", "sgd", "--lr", "0.5", "--linear", "fp8:delayed"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(SRC), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, "-m", "blockfuse", *words, "--out", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    document = json.loads((tmp_path / "model-standard-tp_fsdp-x2-fp8-delayed.json").read_text())
    assert document["workload"]["linear"] == "fp8:delayed"
    assert "--linear fp8:delayed" in document["meta"]["command"]
    assert "Linear layers fp8:delayed" in (tmp_path / "model-standard-tp_fsdp-x2-fp8-delayed.md").read_text()
    for record in document["records"]:
        assert not record.get("error"), record.get("error")
        assert record["loss_rel_diff_max"] < 5e-2, (record["parallel"], record["losses"], record["one_gpu"]["losses"])


def test_linear_option_with_parallel():
    from blockfuse.bench.distributed import settings as distributed

    args = build_parser().parse_args([*COMMAND, "--linear", "fp8"])
    settings = distributed.settings_from(args)
    assert settings.linear == "fp8:tensorwise"
    again = distributed.settings_from(build_parser().parse_args(shlex.split(distributed.command(settings, None))[1:]))
    assert again == settings and distributed.stem(settings) == "model-standard-fsdp_tp-x2-fp8-tensorwise"
    for text, message in (("torchao:rowwise", "bf16 or blockfuse's FP8 ones"), ("fp9", "linear: expected bf16")):
        with pytest.raises(distributed.UsageError, match=message):
            distributed.settings_from(build_parser().parse_args([*COMMAND, "--linear", text]))
