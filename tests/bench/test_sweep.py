"""The op sweep (``blockfuse bench ops --sweep``): its grid, the copy fraction and peer ratio of each cell
(with fake timers), the targets on synthetic cells, and a real run on a tiny grid on the CPU."""

import json
import time

import pytest
import torch

from blockfuse.bench import norm, rotary, runner, sweep
from blockfuse.bench.spec import mode_bytes
from blockfuse.cli import main

RMS = next(b for b in norm.BENCHMARKS if b.name == "rms_norm")
ROTARY = rotary.BENCHMARKS[0]
PEERS_AND_MINE = ("compile", "liger", "blockfuse")
TINY = sweep.Grid(widths=(72,), rows=(3, 5), head_dims=(64,), heads=((2, 1),), seqs=(4, 8), batch=1)


def _settings(providers=PEERS_AND_MINE, modes=("fwd", "fwdbwd")):
    return runner.Settings(dtype="bf16", modes=modes, providers=providers, shapes=None, quick=True,
                           device=torch.device("cpu"))


def _record(bench, shape, mode, provider, ms, error=None):
    """A runner record as ``runner.run`` makes it, with the fields the sweep reads."""
    return {"op": bench.name, "shape": list(shape), "mode": mode, "provider": provider, "bytes": None,
            "ms": None if error else ms, "ms_p20": None if error else ms, "ms_p80": None if error else ms,
            "timing": "fake", "error": error, "rel_err_out": 1e-3 if mode == "fwd" else None,
            "rel_err_grad": None if mode == "fwd" else 2e-3, "rel_err": {"y": 1e-3}}


def _fake_measure(times):
    """``measure`` with fixed ms: ``times[(provider, mode)]``, the same at every shape."""
    def measure(bench, shape, settings):
        return [_record(bench, shape, mode, provider, times[(provider, mode)])
                for provider in settings.providers for mode in settings.modes]

    return measure


def _copy_ms(nbytes, settings):  # a fake copy: 1 GB/s, 1e6 bytes a millisecond
    return nbytes / 1e6


def test_the_grid_has_the_issue_cells():
    declared = runner.declared_ops()
    swept = [b for b in declared if sweep.kind_of(b)]
    # the GEMM-bound ops, declared on (tokens, d, vocab or hidden), are not swept
    assert {b.name for b in declared} - {b.name for b in swept} == {"linear_cross_entropy", "linear_act", "fused_mlp",
                                                                  "gated_mlp"}
    assert {b.name for b in swept} >= {"rms_norm", "layer_norm", "add_rms_norm", "add_layer_norm", "layer_norm_gelu",
                                       "layer_norm_post", "rotary", "swiglu", "geglu", "swiglu_packed",
                                       "bias_dropout_add"}
    assert len(sweep.cells_of(RMS, sweep.FULL)) == 14 * 3
    assert len(sweep.cells_of(ROTARY, sweep.FULL)) == 6 * 3 * 2
    assert sum(len(sweep.cells_of(b, sweep.FULL)) for b in swept) == 10 * 42 + 36
    assert sum(len(sweep.cells_of(b, sweep.QUICK)) for b in swept) == 10 * 7 + 18
    # RoPE's cells: (batch, seq, q_heads, kv_heads, head_dim), every head configuration at every head_dim
    shapes = {cell.shape for cell in sweep.cells_of(ROTARY, sweep.FULL)}
    assert (4, 1024, 16, 4, 72) in shapes and (4, 4096, 32, 8, 256) in shapes
    assert {cell.shape for cell in sweep.cells_of(RMS, sweep.FULL)} >= {(2048, 4304), (32768, 14336), (8192, 1152)}


def test_fraction_and_ratio_arithmetic_with_fake_timers():
    times = {("compile", "fwd"): 3.0, ("liger", "fwd"): 2.5, ("blockfuse", "fwd"): 2.0,
             ("compile", "fwdbwd"): 4.0, ("liger", "fwdbwd"): 8.0, ("blockfuse", "fwdbwd"): 5.0}
    cells = sweep.run([RMS, ROTARY], _settings(), TINY, show_progress=False, measure=_fake_measure(times),
                      time_copy=_copy_ms)
    assert [(c["op"], tuple(c["shape"])) for c in cells] == [
        ("rms_norm", (3, 72)), ("rms_norm", (5, 72)), ("rotary", (1, 4, 2, 1, 64)), ("rotary", (1, 8, 2, 1, 64))]
    for cell in cells:
        bench = RMS if cell["op"] == "rms_norm" else ROTARY
        assert cell["skipped"] is None and cell["dtype"] == "bf16" and cell["large"] is False
        rows_or_seq = cell["shape"][0] if bench is RMS else cell["shape"][1]
        largest = rows_or_seq * 72 * 2 if bench is RMS else 1 * 2 * rows_or_seq * 64 * 2
        assert cell["tensor_bytes"] == largest  # x (rows, 72) of the norm, q (1, 2, seq, 64) of RoPE, in bf16
        for mode in ("fwd", "fwdbwd"):
            entry = cell["modes"][mode]
            moved = mode_bytes(bench, tuple(cell["shape"]), 2, mode)
            assert entry["bytes"] == moved and entry["copy_ms"] == moved / 1e6
            assert entry["fraction"] == pytest.approx(moved / 1e6 / times[("blockfuse", mode)])
            for provider in PEERS_AND_MINE:
                mine = entry["providers"][provider]
                assert mine["fraction"] == pytest.approx(moved / 1e6 / times[(provider, mode)])
                assert mine["ms"] == times[(provider, mode)] and mine["rel_err"] == {"y": 1e-3}
        fwd, both = cell["modes"]["fwd"], cell["modes"]["fwdbwd"]
        assert (fwd["ratio"], fwd["peer"]) == (pytest.approx(2.5 / 2.0), "liger")
        assert (both["ratio"], both["peer"]) == (pytest.approx(4.0 / 5.0), "compile")
        assert fwd["vs_compile"] == pytest.approx(1.5) and both["vs_compile"] == pytest.approx(0.8)
    # the RoPE backward moves what its forward does; the norm's backward moves more
    assert cells[2]["modes"]["fwdbwd"]["bytes"] == 2 * cells[2]["modes"]["fwd"]["bytes"]
    assert cells[0]["modes"]["fwdbwd"]["bytes"] > 2 * cells[0]["modes"]["fwd"]["bytes"]


def _cell(bench, shape, times, *, fraction=None, large=True, error=None):
    """A cell of ``bench`` at ``shape`` with ``times[(provider, mode)]`` ms; blockfuse's copy fraction is
    ``fraction[mode]`` (a fake copy time) and it fails with ``error`` in fwd."""
    settings = _settings()
    records = [_record(bench, shape, mode, provider, ms, error if provider == "blockfuse" and mode == "fwd" else None)
               for (provider, mode), ms in times.items()]
    copies = {mode: (fraction or {}).get(mode, 0.9) * times[("blockfuse", mode)] for mode in settings.modes}
    size = sweep.LARGE_TENSOR_BYTES if large else sweep.LARGE_TENSOR_BYTES - 1
    return sweep.cell_record(sweep.Cell(bench, shape, "r", "c"), settings, size, records, copies, None)


def _times(blockfuse=1.0, compile=1.1, liger=1.2):
    return {(provider, mode): ms for provider, ms in (("compile", compile), ("liger", liger), ("blockfuse", blockfuse))
            for mode in ("fwd", "fwdbwd")}


def _by(checks, target, op="all"):
    return next(check for check in checks if check["target"] == target and check["op"] == op)


def test_targets_pass_on_good_cells_and_name_the_failing_one():
    good = [_cell(RMS, (8192, 1024 + i), _times()) for i in range(10)]
    checks = sweep.targets(good, "cuda")
    assert {(c["target"], c["op"]) for c in checks} >= {(t, "all") for t in sweep.TARGETS}
    for target in ("copy_fraction", "vs_peers"):
        check = _by(checks, target)
        assert check["status"] == "met" and check["passed"] == check["evaluated"] == 20
    assert _by(checks, "small_vs_peers")["status"] == "n/a"  # every cell is large
    assert _by(checks, "rotary_vs_compile")["status"] == "n/a"  # no RoPE cell

    # one large cell at 0.84 of the copy forward (floor 0.85), 0.81 forward+backward (floor 0.80): a miss
    bad = _cell(RMS, (8192, 4304), _times(), fraction={"fwd": 0.84, "fwdbwd": 0.81})
    checks = sweep.targets(good + [bad], "cuda")
    copy = _by(checks, "copy_fraction")
    assert copy["status"] == "missed" and copy["passed"] == 21 and copy["evaluated"] == 22
    assert copy["worst"][0] == {"op": "rms_norm", "shape": [8192, 4304], "mode": "fwd", "value": pytest.approx(0.84),
                                "floor": 0.85}
    assert copy["lowest"] == pytest.approx(0.81)
    assert _by(checks, "copy_fraction", "rms_norm")["status"] == "missed"
    # off CUDA the same cells read n/a, counted all the same
    assert {c["status"] for c in sweep.targets(good + [bad], "cpu")} == {"n/a"}
    assert _by(sweep.targets(good + [bad], "cpu"), "copy_fraction")["passed"] == 21


def test_peer_targets_share_floor_small_tensors_and_rope():
    good = [_cell(RMS, (8192, 1024 + i), _times()) for i in range(19)]
    # 1 of 20 cells (2 of 40 cell-modes: 95%) at 0.97x the faster peer: the share and floor hold
    slower = _cell(RMS, (8192, 768), _times(blockfuse=1.1 / 0.97))
    check = _by(sweep.targets(good + [slower], "cuda"), "vs_peers")
    assert check["status"] == "met" and check["passed"] == 38 and check["evaluated"] == 40
    assert check["lowest"] == pytest.approx(0.97) and check["worst"][0]["shape"] == [8192, 768]
    # a second one: 36 of 40 is below 95%
    check = _by(sweep.targets(good[1:] + [slower, slower], "cuda"), "vs_peers")
    assert check["status"] == "missed" and check["passed"] == 36
    # one cell at 0.94x: below the floor although 95% pass
    floor = _cell(RMS, (8192, 768), _times(blockfuse=1.1 / 0.94))
    assert _by(sweep.targets(good + [floor], "cuda"), "vs_peers")["status"] == "missed"

    # a small tensor is judged against the peers: 0.97x is a miss there
    small = _cell(RMS, (2048, 768), _times(blockfuse=1.1 / 0.97), large=False)
    checks = sweep.targets(good + [small], "cuda")
    assert _by(checks, "small_vs_peers")["status"] == "missed"
    assert (_by(checks, "small_vs_peers")["passed"], _by(checks, "small_vs_peers")["evaluated"]) == (0, 2)
    assert _by(checks, "copy_fraction")["evaluated"] == 38  # the small cell is not judged against the copy

    # RoPE: one head configuration at 0.95x torch.compile: the RoPE target (forward+backward only) misses
    rope = [_cell(ROTARY, (4, 4096, 32, 8, d), _times(blockfuse=1.0, compile=1.2, liger=3.0)) for d in (64, 128)]
    rope.append(_cell(ROTARY, (4, 4096, 16, 4, 72), _times(blockfuse=1.0, compile=0.95, liger=3.0)))
    checks = sweep.targets(rope, "cuda")
    check = _by(checks, "rotary_vs_compile")
    assert check["status"] == "missed" and (check["passed"], check["evaluated"]) == (2, 3)  # fwdbwd only
    assert check["worst"][0]["shape"] == [4, 4096, 16, 4, 72] and check["worst"][0]["mode"] == "fwdbwd"
    assert _by(checks, "rotary_vs_compile", "rotary")["status"] == "missed"
    assert not [c for c in checks if c["target"] == "rotary_vs_compile" and c["op"] == "rms_norm"]


def test_a_failed_blockfuse_cell_is_a_miss():
    failed = _cell(RMS, (8192, 4304), _times(), error="RuntimeError: launch failed")
    assert failed["modes"]["fwd"]["fraction"] is None and failed["modes"]["fwd"]["ratio"] is None
    checks = sweep.targets([failed], "cuda")
    for target in ("copy_fraction", "vs_peers"):
        check = _by(checks, target)
        assert check["status"] == "missed" and (check["passed"], check["evaluated"]) == (1, 2)
        assert check["worst"][0]["value"] is None and check["worst"][0]["mode"] == "fwd"


def test_cells_that_do_not_fit_or_miss_the_budget_are_skipped(tmp_path):
    def never(bench, shape, settings):
        raise AssertionError("a skipped cell must not run")

    cells = sweep.run([RMS], _settings(), TINY, memory_bytes=1, show_progress=False, measure=never, time_copy=_copy_ms)
    assert len(cells) == 2 and all(c["skipped"].startswith("does not fit: needs about") for c in cells)
    assert all(c["modes"] == {} for c in cells)

    def out_of_memory(bench, shape, settings):  # the runner's record of a provider that ran out of memory
        records = _fake_measure(_times())(bench, shape, settings)
        records[1].update(ms=None, error="OutOfMemoryError: CUDA out of memory. Tried to allocate 9.00 GiB")
        return records

    cells = sweep.run([RMS], _settings(), TINY, show_progress=False, measure=out_of_memory, time_copy=_copy_ms)
    assert [c["skipped"] for c in cells] == ["out of memory: compile fwdbwd: OutOfMemoryError: CUDA out of memory. "
                                             "Tried to allocate 9.00 GiB"] * 2
    assert sweep.targets(cells, "cuda")[0]["evaluated"] == 0  # skipped, not failed

    cells = sweep.run([RMS, ROTARY], _settings(), TINY, budget_s=0.0, show_progress=False, measure=never,
                      time_copy=_copy_ms)
    assert len(cells) == 4 and {c["skipped"] for c in cells} == {"time budget spent (--budget)"}

    meta = {**runner.environment(torch.device("cpu")), "command": "test", "elapsed_s": 0.0,
            "settings": {"modes": ["fwd", "fwdbwd"], "dtype": "bf16"}, "grid": {"text": "tiny"}}
    sweep.write(tmp_path, meta, cells)
    document = json.loads((tmp_path / "sweep.json").read_text())
    assert [c["skipped"] for c in document["cells"]] == ["time budget spent (--budget)"] * 4
    markdown = (tmp_path / "sweep.md").read_text()
    assert "## Skipped cells" in markdown and "rotary 1x8x2x1x64: time budget spent" in markdown
    assert (tmp_path / "sweep-rotary.png").stat().st_size > 0


def test_the_budget_is_shared_among_the_ops():
    def slow(bench, shape, settings):  # NOTE: margins for a loaded machine (xdist): a share is 3+ cells' sleep
        time.sleep(0.5)
        return _fake_measure(_times())(bench, shape, settings)

    grid = sweep.Grid(widths=(72, 80), rows=(3, 5), head_dims=(64, 72), heads=((2, 1),), seqs=(4, 8), batch=1)
    cells = sweep.run([RMS, ROTARY], _settings(), grid, budget_s=2.0, show_progress=False, measure=slow,
                      time_copy=_copy_ms)
    ran = {op: [c for c in cells if c["op"] == op and not c["skipped"]] for op in ("rms_norm", "rotary")}
    assert len(cells) == 8 and ran["rms_norm"] and ran["rotary"]  # the first op did not take it all
    assert any(c["skipped"] == "time budget spent (--budget)" for c in cells if c["op"] == "rms_norm")


def test_sweep_on_the_cpu_writes_json_markdown_and_heat_maps(tmp_path, capsys):
    out = tmp_path / "sweep"
    code = main(["bench", "ops", "--sweep", "--quick", "--op", "rms_norm", "--providers", "eager,blockfuse",
                 "--out", str(out)])
    assert code == 0
    document = json.loads((out / "sweep.json").read_text())
    meta = document["meta"]
    assert meta["command"].startswith("blockfuse bench ops --sweep --op rms_norm --dtype bf16 --modes fwd,fwdbwd")
    assert meta["settings"]["modes"] == ["fwd", "fwdbwd"] and meta["grid"]["cells"] == {"rms_norm": 4}
    cells = document["cells"]
    assert [tuple(c["shape"]) for c in cells] == [(3, 72), (64, 72), (3, 200), (64, 200)]  # the CPU grid
    for cell in cells:
        assert cell["skipped"] is None and cell["tensor_bytes"] == cell["shape"][0] * cell["shape"][1] * 2
        for mode, entry in cell["modes"].items():
            assert entry["bytes"] == mode_bytes(RMS, tuple(cell["shape"]), 2, mode) and entry["copy_ms"] > 0
            mine = entry["providers"]["blockfuse"]
            assert mine["error"] is None and mine["ms"] > 0
            assert entry["fraction"] == pytest.approx(entry["copy_ms"] / mine["ms"])
            error = mine["rel_err_out"] if mode == "fwd" else mine["rel_err_grad"]
            assert 0 <= error < 2e-2  # bf16 against the fp32 reference
            assert entry["ratio"] is None  # no torch.compile or Liger on the CPU
    assert {t["status"] for t in document["targets"]} == {"n/a"}
    markdown = (out / "sweep.md").read_text()
    assert meta["card"] in markdown and f"torch {torch.__version__}" in markdown and "triton " in markdown
    assert "## rms_norm" in markdown and "| width \\ rows | 3 | 64 |" in markdown
    assert (out / "sweep-rms_norm.png").read_bytes()[:4] == b"\x89PNG"
    assert "4 cells, 0 skipped" in capsys.readouterr().out


def test_a_sweep_cut_short_keeps_the_heat_maps_of_the_ops_it_finished(tmp_path, monkeypatch):
    """A run stopped mid-way (a device call's time limit) has sweep.json / sweep.md of every cell measured and the
    heat map of each op whose cells were all in, not of the op it was in."""
    out, measured = tmp_path / "sweep", sweep.run

    def cut_short(*args, on_update, **kwargs):
        def update(cells):
            on_update(cells)
            if len({cell["op"] for cell in cells}) == 2:
                raise KeyboardInterrupt  # (the call's limit, in the second op's first cell)
        return measured(*args, on_update=update, **kwargs)

    monkeypatch.setattr(sweep, "run", cut_short)
    with pytest.raises(KeyboardInterrupt):
        main(["bench", "ops", "--sweep", "--quick", "--op", "rms_norm", "layer_norm", "--providers", "eager,blockfuse",
              "--out", str(out)])
    cells = json.loads((out / "sweep.json").read_text())["cells"]
    ops = list(dict.fromkeys(cell["op"] for cell in cells))
    assert len(ops) == 2 and [cell["op"] for cell in cells].count(ops[1]) == 1
    assert (out / f"sweep-{ops[0]}.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / f"sweep-{ops[1]}.png").exists()


def test_sweep_command_line_checks(tmp_path, capsys):
    assert main(["bench", "ops", "--sweep", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "total" in listed and "456 cells, --quick  88" in listed and "not swept: linear_cross_entropy" in listed
    for argv, problem in ((["--sweep", "--shapes", "8x256"], "--sweep runs its own grid"),
                          (["--sweep", "--op", "linear_cross_entropy"], "--sweep: unknown or not swept --op"),
                          (["--budget", "10"], "--budget is for --sweep"),
                          (["--sweep", "--budget", "0"], "--budget: expected seconds above 0"),
                          (["--sweep", "--warm-jobs", "-1"], "--warm-jobs: expected 0 (off) or more"),
                          (["--widths", "96"], "--widths is for --sweep"),
                          (["--sweep", "--widths", "96,x"], "--widths: expected comma-separated sizes"),
                          (["--sweep", "--rows", "0"], "--rows: expected comma-separated sizes"),
                          (["--sweep", "--head-dims", ""], "--head-dims: expected comma-separated sizes")):
        assert main(["bench", "ops", "--quick", "--out", str(tmp_path), *argv]) == 2
        assert capsys.readouterr().err.startswith(f"blockfuse bench ops: {problem}")


def test_sweep_grid_options_replace_the_grid_and_reach_the_command(tmp_path, capsys):
    """--widths / --rows / --head-dims / --seqs: shapes off the grid, named in the reproducing command."""
    out = tmp_path / "off-grid"
    assert main(["bench", "ops", "--sweep", "--quick", "--op", "rms_norm", "rotary", "--providers", "eager,blockfuse",
                 "--widths", "96,40,96", "--rows", "5", "--head-dims", "32", "--seqs", "6", "--out", str(out)]) == 0
    document = json.loads((out / "sweep.json").read_text())
    shapes = [(cell["op"], tuple(cell["shape"])) for cell in document["cells"]]
    batch, heads = sweep.CPU.batch, sweep.CPU.heads
    assert shapes == [("rms_norm", (5, 96)), ("rms_norm", (5, 40))] + [
        ("rotary", (batch, 6, q, kv, 32)) for q, kv in heads]
    meta = document["meta"]
    assert "--widths 96,40 --rows 5 --head-dims 32 --seqs 6 --budget" in meta["command"]
    assert meta["grid"]["widths"] == [96, 40] and meta["grid"]["rows"] == [5]
    for cell in document["cells"]:
        assert all(entry["providers"]["blockfuse"]["error"] is None for entry in cell["modes"].values())
    capsys.readouterr()
    assert main(["bench", "ops", "--sweep", "--list", "--op", "rms_norm", "--widths", "96,40", "--rows", "5,7"]) == 0
    listed = capsys.readouterr().out
    assert "with --widths 96,40 --rows 5,7: widths {96, 40} x rows {5, 7}" in listed and "; 4 cells of rms_norm" in listed


ONE_CELL = sweep.Grid(widths=(72,), rows=(3,), head_dims=(64,), heads=((2, 1),), seqs=(4,), batch=1)


def _sweep_document(out, *options):
    """``--sweep`` of rms_norm with torch.compile and blockfuse on the CPU (one cell, see the tests' grid)."""
    assert main(["bench", "ops", "--sweep", "--quick", "--op", "rms_norm", "--providers", "compile,blockfuse",
                 "--out", str(out), *options]) == 0
    return json.loads((out / "sweep.json").read_text())


def _structure(document):
    """Each cell's place, and per mode each provider's fields and error."""
    return [(cell["op"], cell["shape"], cell["skipped"],
             {mode: {provider: (sorted(entry), entry["error"]) for provider, entry in m["providers"].items()}
              for mode, m in cell["modes"].items()})
            for cell in document["cells"]]


def test_warm_jobs_fill_the_compile_caches_before_the_sweep_measures(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep, "grid_for", lambda cuda, quick: ONE_CELL)  # the parent's grid; workers get its cells
    # fresh caches, which the spawned workers inherit through the environment
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache" / "triton"))
    warm = _sweep_document(tmp_path / "warm", "--warm-jobs", "1")  # (one cell: a second process would idle)
    printed = capsys.readouterr().out
    # NOTE: the run without a warm-up reads the caches the first one filled, not cold ones: a cold compile
    # takes most of this test's time on the CPU
    plain = _sweep_document(tmp_path / "plain")

    assert plain["meta"]["warm_up"] is None and _structure(warm) == _structure(plain)
    assert [cell["shape"] for cell in warm["cells"]] == [[3, 72]]
    assert all(m["providers"]["compile"]["ms"] > 0 for m in warm["cells"][0]["modes"].values())
    report = warm["meta"]["warm_up"]
    assert (report["jobs"], report["cells"], report["warmed"], report["too_large"]) == (1, 1, 1, 0)
    assert report["failures"] == []
    assert report["caches"]["dir"] == str(tmp_path / "cache") and report["caches"]["fx_graph_cache"]
    # every compile while measuring was a hit: no misses, where fresh caches without the warm-up miss each
    counts = warm["meta"]["compile_cache"]
    assert counts["fxgraph_cache_hit"] >= 1 and counts["autograd_cache_hit"] >= 1
    assert counts["fxgraph_cache_miss"] == counts["autograd_cache_miss"] == 0
    assert plain["meta"]["compile_cache"] == counts  # the same compiles as without the warm-up
    assert "--warm-jobs 1" in warm["meta"]["command"]
    assert "warm-up: 1 jobs, 1/1 cells warmed, 0 too large for a worker, 0 failures" in printed
    assert f"FX graph {counts['fxgraph_cache_hit']} hits, 0 misses" in printed
    assert "- warm-up: 1 processes compiled 1 of 1 cells first" in (tmp_path / "warm" / "sweep.md").read_text()


def test_a_cell_that_fails_in_a_warm_up_worker_is_reported_not_raised():
    # NOTE: spawned workers do not see monkeypatches: cells that cannot be built fail there instead
    cells = [("rms_norm", (3, -1)), ("no_such_op", (3, 72)), ("rms_norm", (3, 72))]
    report = runner.warm_up(cells, _settings(providers=("blockfuse",), modes=("fwd",)), 1, show_progress=False)
    assert (report["cells"], report["warmed"]) == (3, 1)  # the worker went on after each failure
    assert sorted(report["failures"]) == ["no_such_op 3x72 KeyError: 'no_such_op'",
                                          "rms_norm 3x-1 RuntimeError: Trying to create tensor with negative "
                                          "dimension -1: [3, -1]"]
