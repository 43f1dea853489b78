from blockfuse.bench import report


def _record(op, shape, mode, provider, ms, frac=None, ms_eager=None):
    return {
        "op": op,
        "shape": list(shape),
        "dtype": "bf16",
        "mode": mode,
        "provider": provider,
        "ms": ms,
        "ms_eager": ms_eager,
        "gbps": 1.0,
        "frac_copy": frac,
        "peak_mib": 1.0,
        "rel_err_out": 1e-3,
        "rel_err_grad": 1e-3,
        "rel_err": {},
        "error": None,
    }


def _records():
    big, small = (16384, 4096), (2048, 1024)
    rows = []
    for mode, (compile_ms, liger_ms, mine_ms, frac) in {
        "fwd": (1.0, 0.9, 0.8, 0.93),
        "fwdbwd": (3.0, 2.5, 2.6, 0.79),
    }.items():
        rows += [
            _record("rms_norm", big, mode, "compile", compile_ms),
            _record("rms_norm", big, mode, "liger", liger_ms),
            _record("rms_norm", big, mode, "blockfuse", mine_ms, frac),
        ]
    rows += [
        # the small-shape target compares eager-call times (host overhead included), not graph times
        _record("rms_norm", small, "fwdbwd", "compile", 0.02, ms_eager=0.05),
        _record("rms_norm", small, "fwdbwd", "blockfuse", 0.016, ms_eager=0.04),
    ]
    failed = _record("rms_norm", small, "fwdbwd", "liger", None)
    failed["error"] = "RuntimeError: boom"
    return rows + [failed]


def test_targets_met_and_missed():
    by_target = {t["target"]: t for t in report.targets(_records(), "cuda")}
    assert by_target["copy_fraction_fwd"]["status"] == "met"
    assert (
        by_target["copy_fraction_fwdbwd"]["status"] == "missed"
        and "0.79" in by_target["copy_fraction_fwdbwd"]["text"]
    )
    peers = by_target["vs_peers"]
    assert (
        peers["status"] == "missed"
        and "16384x4096 fwdbwd 0.96x of liger" in peers["text"]
        and "1/3" in peers["text"]
    )
    assert (
        by_target["small_fwdbwd_vs_compile"]["status"] == "met"
        and by_target["small_fwdbwd_vs_compile"]["value"] == 0.05 / 0.04
    )
    assert report.targets(_records(), "cpu") == []


def test_ratio_uses_the_faster_peer_and_skips_failures():
    index = report._index(_records())
    assert report.ratio_to_peers(index, "rms_norm", (16384, 4096), "fwd") == (0.9 / 0.8, "liger")
    assert report.ratio_to_peers(index, "rms_norm", (2048, 1024), "fwdbwd") == (0.02 / 0.016, "compile")


def test_markdown_has_a_table_per_op_and_mode():
    meta = {
        "card": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0",
        "sm_count": 132,
        "torch": "2.11.0",
        "triton": "3.6.0",
        "cuda": "13.0",
        "liger_kernel": "0.8.5",
        "python": "3.12",
        "date": "2026-01-01",
        "blockfuse_implementation": "triton",
        "command": "blockfuse bench ops",
        "device": "cuda",
    }
    copy = {"gbps": 3000.0, "bytes": 2**31, "ms": 0.7}
    text = report.markdown(meta, copy, _records())
    assert (
        "NVIDIA H100 80GB HBM3" in text
        and "torch 2.11.0, triton 3.6.0" in text
        and "`blockfuse bench ops`" in text
    )
    assert "## rms_norm, forward (bf16)" in text and "## rms_norm, forward+backward (bf16)" in text
    assert "| shape | compile | liger | blockfuse | blockfuse vs best peer |" in text
    assert "0.8 ms · 0.93 · err 1.0e-03 · 1 MiB" in text and "1.12x (liger)" in text
    assert "- **missed**:" in text and "## Errors" in text and "RuntimeError: boom" in text
