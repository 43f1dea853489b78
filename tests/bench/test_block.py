"""End to end: ``blockfuse bench block`` / ``model`` through the CLI on tiny shapes, and the pieces they use."""

from __future__ import annotations

import json

import pytest
import torch

from blockfuse.bench import block
from blockfuse.bench.block_report import targets
from blockfuse.bench.writer import noisy
from blockfuse.cli import main
from tests.helpers import use_few_timed_calls


def _run(tmp_path, *args):
    code = main(["bench", *args, "--quick", "--out", str(tmp_path)])
    return code


@pytest.mark.usefixtures("few_timed_calls")
def test_bench_block_writes_every_file_and_field(tmp_path):
    # NOTE: the full report's CPU block (analyze.targets.CPU_SHAPE, 1x16x64 reordered): the compiled providers' graphs
    # are the report test's, so whichever runs second reads Inductor's on-disk cache (about 8 s of CI's compiles)
    code = _run(tmp_path, "block", "reordered", "--shape", "1,16,64", "--providers",
                "eager,compile:default,surgical:default,fused", "--modes", "infer,fwd,fwdbwd")
    assert code == 0
    for suffix in ("json", "csv", "md", "png"):
        assert (tmp_path / f"block-reordered.{suffix}").stat().st_size > 0
    import csv

    rows = list(csv.DictReader((tmp_path / "block-reordered.csv").open()))
    assert len(rows) == 12 and float(rows[0]["ms"]) > 0 and rows[0]["provider"] == "eager"
    document = json.loads((tmp_path / "block-reordered.json").read_text())
    assert document["workload"]["shape"] == [1, 16, 64] and document["workload"]["layers"] == 1
    assert document["meta"]["command"].startswith("blockfuse bench block reordered --shape 1x16x64")
    records = document["records"]
    assert {(r["provider"], r["mode"]) for r in records} == {
        (p, m) for p in ("eager", "compile:default", "surgical:default", "fused") for m in ("infer", "fwd", "fwdbwd")}
    for record in records:
        assert "error" not in record, record
        assert record["ms"] > 0 and record["p20"] <= record["ms"] <= record["p80"]
        # every provider runs the same weights: bf16 errors against the fp32 eager run are small but not 0
        assert 0 < record["rel_err_out"] < 0.05 and 0 < record["rel_err_grad"] < 0.05
    assert any("error" in t["text"] for t in document["targets"])
    markdown = (tmp_path / "block-reordered.md").read_text()
    assert "| fused |" in markdown and "## Targets" in markdown


@pytest.mark.usefixtures("few_timed_calls")
def test_bench_model_runs_a_stack_with_a_padding_mask(tmp_path):
    code = _run(tmp_path, "model", "siglip2", "--shape", "2,8,64", "--layers", "2", "--providers", "eager,fused",
                "--modes", "bwd,fwdbwd")
    assert code == 0
    document = json.loads((tmp_path / "model-siglip2.json").read_text())
    assert document["workload"]["layers"] == 2 and document["workload"]["padding_mask"]
    ceiling = document["workload"]["gemm_ceiling"]  # measured on CUDA only
    assert ceiling["tflops"] > 0 if torch.cuda.is_available() else ceiling is None
    records = {(r["provider"], r["mode"]): r for r in document["records"]}
    for provider in ("eager", "fused"):
        backward, step = records[(provider, "bwd")], records[(provider, "fwdbwd")]
        assert backward["ms"] > 0 and "error" not in backward
        # the backward's FLOPs are twice the forward's, the step's three times
        assert backward["gemm_tflops"] * backward["ms"] == pytest.approx(2 / 3 * step["gemm_tflops"] * step["ms"])
        assert 0 < backward["rel_err_grad"] < 0.05 and ("gemm_fraction" in backward) == torch.cuda.is_available()
    assert "bwd ms (x eager)" in (tmp_path / "model-siglip2.md").read_text()


@pytest.mark.usefixtures("few_timed_calls")
def test_materialized_attention_is_a_labelled_second_baseline(tmp_path):
    """eager-materialized-attention: the eager stack with attention materialized as Hugging Face's eager
    attention computes it, every block switched, labelled in the reports and compared with every provider."""
    eager, _ = block.build_model("siglip2", (2, 8, 64), torch.float32, layers=2, d_model=64, n_heads=4,
                                 head_dim=None, ffn_hidden=96)
    module, run = block.provider_module(eager, block.MATERIALIZED_ATTENTION)
    assert run is module and {b.attn.config.attention for b in module.blocks} == {"eager"}
    assert {b.attn.config.attention for b in eager.blocks} == {"sdpa"}  # a copy: the eager module is left alone

    providers = f"eager,{block.MATERIALIZED_ATTENTION}"
    code = _run(tmp_path, "model", "siglip2", "--shape", "2,8,64", "--layers", "2", "--providers", providers,
                "--modes", "infer,fwdbwd")
    assert code == 0
    document = json.loads((tmp_path / "model-siglip2.json").read_text())
    assert f"--providers {providers}" in document["meta"]["command"]
    label = "eager, materialized attention (HF eager style)"
    assert document["workload"]["labels"][block.MATERIALIZED_ATTENTION] == label
    records = {(r["provider"], r["mode"]): r for r in document["records"]}
    for mode in ("infer", "fwdbwd"):
        record = records[(block.MATERIALIZED_ATTENTION, mode)]
        assert "error" not in record and record["ms"] > 0
        assert 0 < record["rel_err_out"] < 0.05 and 0 < record["rel_err_grad"] < 0.05
    compared = document["comparisons"][block.MATERIALIZED_ATTENTION]
    assert compared["label"] == label and list(compared["providers"]) == ["eager"]
    speedup = compared["providers"]["eager"]["infer"]
    markdown = (tmp_path / "model-siglip2.md").read_text()
    assert f"## Against {label}" in markdown and f"`{block.MATERIALIZED_ATTENTION}`: {label}" in markdown
    if noisy(records[(block.MATERIALIZED_ATTENTION, "infer")]) or noisy(records[("eager", "infer")]):
        assert speedup is None and "| eager | noisy |" in markdown  # a noisy median gives no speed-up
        return
    assert speedup == pytest.approx(records[(block.MATERIALIZED_ATTENTION, "infer")]["ms"]
                                    / records[("eager", "infer")]["ms"])
    assert f"| eager | {speedup:.2f} |" in markdown


def test_compile_times_cold_and_warm_of_chosen_providers(tmp_path):
    """``--compile-times PROVIDERS``: cold and warm compile times for those providers only (here every compiled
    one, so the command records the bare flag), shown in the table; a provider with nothing to compile is refused.
    NOTE: one bench run for what were two tests (each compiles the surgical block twice: about 30 s on CI)."""
    code = _run(tmp_path, "block", "standard", "--shape", "1,8,64", "--providers", "eager,fused,surgical:default",
                "--modes", "infer", "--compile-times", "surgical:default")
    assert code == 0
    document = json.loads((tmp_path / "block-standard.json").read_text())
    command = document["meta"]["command"]
    assert "--compile-times" in command and "--compile-times surgical:default" not in command  # the bare flag
    records = {r["provider"]: r for r in document["records"]}
    assert [p for p, r in records.items() if "compile_cold_s" in r] == ["surgical:default"]  # eager, fused: none
    surgical = records["surgical:default"]
    assert surgical["compile_cold_s"] > 0 and surgical["compile_warm_s"] > 0
    assert "compile cold" in (tmp_path / "block-standard.md").read_text()
    assert _run(tmp_path, "block", "standard", "--shape", "1,8,64", "--providers", "eager,fused", "--modes", "infer",
                "--compile-times", "fused") == 2


def test_a_failing_provider_is_reported_and_the_rest_still_run(tmp_path, monkeypatch):
    original = block._Workload.provider_module

    def broken(self, provider):
        if provider == "fused":
            raise RuntimeError("this provider is broken")
        return original(self, provider)

    monkeypatch.setattr(block._Workload, "provider_module", broken)
    settings = block.BlockSettings(name="standard", shape=(1, 8, 64), layers=1, dtype=torch.float32,
                                   providers=("fused", "eager"), modes=("infer",), device=torch.device("cpu"),
                                   quick=True, overrides=(("d_model", 64), ("n_heads", 4), ("ffn_hidden", 96)))
    with pytest.raises(ValueError, match="name: expected one of"):  # a bad workload is not swallowed
        block.run_block(block.BlockSettings(**{**settings.__dict__, "name": "nope"}))
    workload, records = block.run_block(settings)
    by_provider = {r["provider"]: r for r in records}
    assert "this provider is broken" in by_provider["fused"]["error"]
    assert "error" not in by_provider["eager"] and by_provider["eager"]["ms"] > 0


def test_targets_compare_the_fastest_of_each_family():
    records = [
        {"provider": "compile:default", "mode": "fwd", "ms": 1.0},
        {"provider": "compile:reduce-overhead", "mode": "fwd", "ms": 0.8},
        {"provider": "fused", "mode": "fwd", "ms": 0.9},
        {"provider": "fused+compile:default", "mode": "fwd", "ms": 0.7},
        {"provider": "fused+compile:default", "mode": "fwdbwd", "ms": 2.0, "peak_mib": 300.0},
        {"provider": "compile:default", "mode": "fwdbwd", "ms": 2.5, "peak_mib": 400.0},
        {"provider": "fused", "mode": "fwdbwd", "error": "boom"},
    ]
    checks = {t["text"].split(":")[0]: t for t in targets({"name": "reordered"}, records)}
    forward = checks["training forward"]
    assert forward["value"] == pytest.approx(0.8 / 0.7) and forward["status"] == "met"
    assert checks["forward + backward"]["value"] == pytest.approx(2.5 / 2.0) and checks["forward + backward"][
        "status"] == "met"
    memory = checks["peak training memory"]
    assert memory["value"] == pytest.approx(0.75) and memory["status"] == "met"


def test_siglip2_targets_take_the_faster_of_eager_and_compile():
    """The fused-MLP issue's SigLIP-2 targets: speed against the faster of eager and the fastest compile
    mode, memory against eager's peak and against the smallest compile peak."""
    records = [
        {"provider": "eager", "mode": "fwd", "ms": 10.0},
        {"provider": "eager-materialized-attention", "mode": "fwd", "ms": 30.0},
        {"provider": "compile:default", "mode": "fwd", "ms": 11.0},
        {"provider": "fused", "mode": "fwd", "ms": 8.0},
        {"provider": "eager", "mode": "fwdbwd", "ms": 30.0, "peak_mib": 1000.0},
        {"provider": "compile:default", "mode": "fwdbwd", "ms": 28.0, "peak_mib": 900.0},
        {"provider": "compile:reduce-overhead", "mode": "fwdbwd", "ms": 29.0, "peak_mib": 1200.0},
        {"provider": "fused", "mode": "fwdbwd", "ms": 25.0, "peak_mib": 640.0},
    ]
    checks = targets({"name": "siglip2"}, records)
    by_text = {t["text"].split(":")[0] + (" eager" if "/ eager" in t["text"] else ""): t for t in checks}
    forward = by_text["training forward"]
    assert "(eager)" in forward["text"] and forward["value"] == pytest.approx(10 / 8) and forward["status"] == "met"
    step = by_text["forward + backward"]
    assert "(compile:default)" in step["text"] and step["value"] == pytest.approx(28 / 25)
    assert step["status"] == "missed"
    assert by_text["peak training memory eager"]["value"] == pytest.approx(0.64)
    assert by_text["peak training memory eager"]["status"] == "met"
    to_compile = by_text["peak training memory"]
    assert "compile (compile:default)" in to_compile["text"] and to_compile["value"] == pytest.approx(640 / 900)
    assert to_compile["status"] == "missed"


def test_unknown_preset_is_a_clear_error(tmp_path, capsys):
    assert _run(tmp_path, "block", "nope") == 2
    assert "blockfuse bench block: unknown preset 'nope'" in capsys.readouterr().err


def test_torchao_linear_layers_for_the_baseline_providers():
    """``linear="torchao:RECIPE"``: the eager / compiled providers' Linear layers become torchao's Float8Linear
    (the issue's FP8 baseline); a fused provider is refused with a message that names the option."""
    pytest.importorskip("torchao.float8")
    from torchao.float8.float8_linear import Float8Linear as TorchaoFloat8Linear

    base = dict(name="te-4layer", shape=(1, 32, 64), layers=1, dtype=torch.bfloat16, modes=("infer",),
                device=torch.device("cpu"), quick=True, overrides=(("d_model", 64), ("n_heads", 4), ("ffn_hidden", 64)))
    workload = block._Workload(block.BlockSettings(**base, providers=("eager",), linear="torchao:tensorwise"))
    module, _ = workload.provider_module("eager")
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(isinstance(m, TorchaoFloat8Linear) for m in linears)
    with pytest.raises(ValueError, match="torchao:tensorwise: the fused providers take blockfuse's FP8 layers"):
        workload.provider_module("fused")


FP8_BASE = dict(name="te-4layer", shape=(1, 32, 64), layers=1, dtype=torch.bfloat16, modes=("infer", "fwdbwd"),
                device=torch.device("cpu"), quick=True, overrides=(("d_model", 64), ("n_heads", 4), ("ffn_hidden", 64)))


@pytest.fixture(scope="module")
def bf16_eager_records():
    """The eager bf16 run the FP8 runs are compared with (the same for every recipe: run once)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_few_timed_calls(monkeypatch, calls=1)
        return block.run_block(block.BlockSettings(**FP8_BASE, providers=("eager",)), show_progress=False)[1]


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "tensorwise+recompute"])
def test_fp8_linear_layers_in_every_provider(recipe, bf16_eager_records, monkeypatch):
    """``linear="fp8:RECIPE"``: each provider's copy has its Linear layers as Float8Linear (the fused blocks' MLP
    runs its GEMMs through them too), the eager bf16 module is untouched, and the errors against fp32 are FP8's:
    larger than bf16's, yet small. A bad value names the argument."""
    from blockfuse.nn.fp8 import Float8Linear

    with pytest.raises(ValueError, match="linear: expected bf16, fp8"):
        block.parse_linear("fp4")
    settings = block.BlockSettings(**FP8_BASE, providers=("eager", "fused"), linear=f"fp8:{recipe}")
    workload = block._Workload(settings)
    for provider in ("eager", "fused"):
        module, _ = workload.provider_module(provider)
        linears = {name: m for name, m in module.named_modules() if isinstance(m, torch.nn.Linear)}
        assert linears and all(isinstance(m, Float8Linear) and m.recipe == recipe.split("+")[0]
                               and m.recompute_activation == recipe.endswith("+recompute")
                               for m in linears.values()), linears
    assert not any(isinstance(m, Float8Linear) for m in workload.eager.modules())
    use_few_timed_calls(monkeypatch, calls=1)  # the records' errors are the point, not their times
    _, records = block.run_block(settings, show_progress=False)
    for record in records:
        assert "error" not in record, record
        assert bf16_eager_records[0]["rel_err_out"] < record["rel_err_out"] < 0.2
        assert record["rel_err_grad"] < 0.3
