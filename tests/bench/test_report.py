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


def test_targets_use_each_ops_largest_shape_and_the_rotary_speedup():
    """Copy fractions are read at the shape moving the most bytes (RoPE's are 5-d, not 16384x4096);
    RoPE forward+backward must be 1.2x torch.compile there; no small-shape target without that shape."""
    big, other = (8, 4096, 32, 8, 128), (4, 2048, 32, 32, 128)
    rows = []
    for shape, moved, frac, mine_ms, compile_ms in ((other, 100, 0.5, 1.0, 1.1), (big, 200, 0.94, 1.0, 1.21)):
        for mode in ("fwd", "fwdbwd"):
            rows.append(dict(_record("rotary", shape, mode, "blockfuse", mine_ms, frac), bytes=moved))
            rows.append(dict(_record("rotary", shape, mode, "compile", compile_ms), bytes=moved))
    by_target = {t["target"]: t for t in report.targets(rows, "cuda")}
    fwd = by_target["copy_fraction_fwd"]
    assert fwd["value"] == 0.94 and "8x4096x32x8x128" in fwd["text"]
    speedup = by_target["fwdbwd_vs_compile"]
    assert speedup["status"] == "met" and speedup["value"] == 1.21
    assert "4x2048x32x32x128 1.10x" in speedup["text"]
    assert "small_fwdbwd_vs_compile" not in by_target
    slower = [dict(r, ms=1.1) if r["provider"] == "blockfuse" and tuple(r["shape"]) == big else r for r in rows]
    assert {t["target"]: t for t in report.targets(slower, "cuda")}["fwdbwd_vs_compile"]["status"] == "missed"
