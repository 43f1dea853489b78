"""A digest of the sm_90 machine code of every kernel launch the ops make: run it before and after a change that
should not change the code (a refactor of a kernel's helpers, a moved constant) and compare, with no GPU.

    TRITON_INTERPRET=1 python benchmarks/sass_digest.py [--kernels NAME,...] --out FILE.json
    python benchmarks/sass_digest.py --compare BEFORE.json AFTER.json [--added NAME=DEFAULT ...]

The launches are those of ``tests/ops/test_sm90_compile.py`` (its ``_exercise_every_op``, recorded in Triton's
interpreter: argument types, constants, warps, as each launch specializes them), every one of them, not its
covering subset; ``--kernels`` keeps those of the named kernels. Each is compiled for sm_90 without the interpreter,
with the Triton imported here and with each of ``BLOCKFUSE_SM90_TRITONS`` (folders holding another ``triton``, e.g.
``pip install --no-deps --target DIR triton==3.6.0``, the lent GPU's), and its SASS (``nvdisasm`` of the cubin,
without line information: code that moved in its file keeps its digest) hashed. ``--compare`` prints the launches
whose digests differ and exits 1 if any does. ``--added NAME=DEFAULT``: a constexpr parameter the change added with a
default that should keep the old code: AFTER's launches with NAME at DEFAULT are compared with BEFORE's without it,
and those with another value are counted as new launches.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (the repository root: tests/)

# After tests/ops/test_sm90_compile.py's BUILD_LAUNCH (its ``build(launch)``), in a subprocess per Triton.
DIGEST_BODY = r"""
import hashlib, json, re, subprocess, sys, tempfile
from pathlib import Path

nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
launches = json.loads(sys.stdin.read())
digests = {}
for key, launch in launches.items():
    compiled = build(launch)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(compiled.asm["cubin"])
        sass = subprocess.run([str(nvdisasm), "-c", str(path)], capture_output=True, text=True, check=True).stdout
    code = [re.sub(r"/\*[0-9a-f]{4,}\*/", "", line).strip() for line in sass.splitlines()
            if line.strip() and not line.lstrip().startswith(("//", "."))]
    digests[key] = hashlib.sha256("\n".join(code).encode()).hexdigest()[:16]
    if len(sys.argv) > 1:  # --dump FOLDER: the SASS of each launch, named by its digest
        Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
        (Path(sys.argv[1]) / f"{launch['kernel']}-{digests[key]}.sass").write_text("\n".join(code))
print(json.dumps({"triton": triton.__version__, "digests": digests}))
"""


def record(kernels: set[str] | None) -> dict[str, dict]:
    """key -> launch record of every launch ``_exercise_every_op`` makes (of ``kernels`` only, when given)."""
    import pytest

    from tests.ops.test_sm90_compile import _exercise_every_op, _record_launches

    with pytest.MonkeyPatch.context() as monkeypatch:
        launches = _record_launches(monkeypatch)
        _exercise_every_op("cpu")
    return {key: launch for key, launch in launches.items() if kernels is None or launch["kernel"] in kernels}


def _without_added(digests: dict, added: dict) -> tuple[dict, int]:
    """``digests`` keyed as before the change that ``added`` constexprs (name -> default): the launches with each at its
    default, the name dropped from their keys; and how many launches set one otherwise (new launches)."""
    kept, new = {}, 0
    for key, digest in digests.items():
        launch = json.loads(key)
        if any(launch["constexprs"].get(name, default) != default for name, default in added.items()):
            new += 1
            continue
        for name in added:
            launch["constexprs"].pop(name, None)
            launch["signature"].pop(name, None)
        kept[json.dumps(launch, sort_keys=True) if added else key] = digest
    return kept, new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", help="comma-separated kernel names (default: every kernel)")
    parser.add_argument("--out", help="write the digests here (JSON)")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--dump", help="a folder for each launch's SASS as hashed (KERNEL-DIGEST.sass)")
    parser.add_argument("--added", action="append", default=[], metavar="NAME=DEFAULT",
                        help="(--compare) a constexpr the change added; its default keeps the old code")
    args = parser.parse_args()
    if args.compare:
        before, after = (json.load(open(path)) for path in args.compare)
        added = {name: json.loads(value) for name, value in (item.split("=", 1) for item in args.added)}
        differ = 0
        for version, digests in after.items():
            old, _ = _without_added(before.get(version, {}), added)
            digests, new = _without_added(digests, added)
            changed = [key for key, digest in digests.items() if old.get(key) not in (None, digest)]
            missing = sorted(set(old) ^ set(digests))
            print(f"triton {version}: {len(digests)} launches, {len(changed)} with other code, "
                  f"{len(missing)} in one file only" + (f"; {new} new launches (an added constexpr set)" if added
                                                         else ""))
            for key in changed:
                launch = json.loads(key)
                print(f"  differs: {launch['kernel']} {launch['constexprs']} {sorted(launch['signature'].items())[:3]}...")
            differ += len(changed)
        sys.exit(1 if differ else 0)
    if os.environ.get("TRITON_INTERPRET") != "1":
        parser.error("set TRITON_INTERPRET=1: the launches are recorded in Triton's interpreter")
    from tests.ops.test_sm90_compile import BUILD_LAUNCH, _with_each_triton

    launches = record(set(args.kernels.split(",")) if args.kernels else None)
    print(f"{len(launches)} launches of {len({launch['kernel'] for launch in launches.values()})} kernels")
    result = {}
    dump = [args.dump] if args.dump else []
    for report in _with_each_triton(BUILD_LAUNCH + DIGEST_BODY, *dump, stdin=json.dumps(launches)):
        result[report["triton"]] = report["digests"]
        print(f"triton {report['triton']}: {len(report['digests'])} digests")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
