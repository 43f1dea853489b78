"""End to end: ``blockfuse bench ops`` through the CLI, on small shapes (CPU, or CUDA if present)."""

import json

from blockfuse.cli import main

RECORD_FIELDS = {
    "op",
    "shape",
    "dtype",
    "mode",
    "provider",
    "bytes",
    "ms",
    "ms_p20",
    "ms_eager",
    "ms_eager_p20",
    "ms_eager_p80",
    "timing",
    "ms_p80",
    "gbps",
    "frac_copy",
    "peak_mib",
    "rel_err_out",
    "rel_err_grad",
    "rel_err",
    "error",
}
META_FIELDS = {
    "date",
    "card",
    "compute_capability",
    "torch",
    "triton",
    "liger_kernel",
    "cuda",
    "command",
    "device",
}


def test_bench_ops_quick_writes_json_and_markdown(tmp_path, capsys):
    out = tmp_path / "results"
    code = main(
        [
            "bench",
            "ops",
            "--quick",
            "--op",
            "rms_norm",
            "add_rms_norm",
            "--shapes",
            "8x256",
            "--providers",
            "eager,reference,blockfuse",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    document = json.loads((out / "ops.json").read_text())
    assert META_FIELDS <= set(document["meta"])
    assert document["meta"]["command"].startswith("blockfuse bench ops --op rms_norm add_rms_norm --shapes 8x256")
    assert "copy" in document and "targets" in document
    records = document["records"]
    assert len(records) == 2 * 3 * 3  # ops x modes x providers
    for record in records:
        assert set(record) - {"graph_error"} == RECORD_FIELDS  # graph_error: only when capture failed
        assert record["error"] is None, record
        assert record["ms"] > 0 and record["gbps"] > 0
    markdown = (out / "ops.md").read_text()
    assert document["meta"]["card"] in markdown and "torch " in markdown and "triton " in markdown
    assert "blockfuse bench ops --op rms_norm" in markdown
    assert "## rms_norm, forward (bf16)" in markdown and "## add_rms_norm, forward+backward (bf16)" in markdown
    assert "| shape | eager | reference | blockfuse |" in markdown
    printed = capsys.readouterr().out
    assert "18 measurements, 0 failed" in printed


def test_bench_ops_reports_a_failing_peer_without_failing(tmp_path):
    out = tmp_path / "results"
    # liger: not installed, or installed but without a GPU driver on the CPU; either way not fatal.
    code = main(
        [
            "bench",
            "ops",
            "--quick",
            "--op",
            "rms_norm",
            "--shapes",
            "8x256",
            "--modes",
            "fwd",
            "--providers",
            "eager,liger",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    records = {r["provider"]: r for r in json.loads((out / "ops.json").read_text())["records"]}
    assert records["eager"]["error"] is None and records["eager"]["ms"] > 0
    import torch

    if not torch.cuda.is_available():
        assert records["liger"]["error"]
        assert "## Errors" in (out / "ops.md").read_text()


def test_bench_ops_rejects_unknown_names(tmp_path, capsys):
    for argv, problem in ((["--op", "nope"], "unknown --op nope"), (["--modes", "fwd,sideways"], "unknown --modes"),
                          (["--providers", "eager,tvm"], "unknown --providers tvm"), (["--shapes", "8xq"], "--shapes")):
        assert main(["bench", "ops", "--quick", "--out", str(tmp_path), *argv]) == 2
        assert capsys.readouterr().err.startswith(f"blockfuse bench ops: {problem}")


def test_bench_ops_list_names_every_declared_op(capsys):
    from blockfuse.bench.cli import declared_ops

    assert main(["bench", "ops", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == [bench.name for bench in declared_ops()]
    assert {"rms_norm", "swiglu", "bias_dropout_add"} <= set(listed)
