# Sourced by the scripts/*_gpu.sh runners (bash; the repository root is the current directory): puts the
# wheels carried in .whl/ (e.g. Liger-Kernel, installed into /tmp/site) and then src/ on PYTHONPATH.
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}

# step SECONDS NAME COMMAND...: runs COMMAND under a time limit with its output in $OUT/NAME.log, then prints its
# exit status, its time and the log's last lines (the runners set OUT first).
step() {
    local seconds=$1 name=$2
    shift 2
    local began=$SECONDS
    timeout -s INT -k 10 "$seconds" "$@" > "$OUT/$name.log" 2>&1
    echo "$name exit $? after $((SECONDS - began)) s" | tee -a "$OUT/$name.log"
    tail -4 "$OUT/$name.log"
}

# write_env: versions, the card, the versions of transformers and the carried peers, and the source digest of the
# copy's src/ (blockfuse.bench.runner.source_digest: which code ran, whatever commit the copy names) into $OUT/env.log.
write_env() {
    python3 -m blockfuse env > "$OUT/env.log" 2>&1
    nvidia-smi --query-gpu=name,memory.total --format=csv >> "$OUT/env.log" 2>&1
    python3 -c "
import importlib.metadata as metadata
for name in ('transformers', 'liger-kernel', 'torchao', 'cut-cross-entropy'):
    try:
        print(name, metadata.version(name))
    except metadata.PackageNotFoundError:
        print(name, 'not installed')" >> "$OUT/env.log" 2>&1
    python3 -c "import blockfuse.bench.runner as r; print('source digest', r.source_digest())" >> "$OUT/env.log" 2>&1
}

# old_code: OLD=(env PYTHONPATH=...) when _gpu/old/src holds the code before a change (`git archive COMMIT src |
# tar x -C _gpu/old`), else OLD=() (an A/B's old steps are then skipped: `[ ${#OLD[@]} -gt 0 ] && step ...`).
old_code() {
    OLD=()
    [ -d _gpu/old/src ] && OLD=(env PYTHONPATH="$PWD/_gpu/old/src:$PYTHONPATH")
}

# warm_norm_tiles DIR SHAPES FORMS ARG...: benchmarks/norm_tiles.py started in the background once a shape and form,
# side by side (WARM_S seconds at most, no float64 check), so that Triton's cache holds their builds before one process
# times them all (their own times are not used); logs and results under DIR. The caller waits (`wait`).
warm_norm_tiles() {
    local dir=$1 shapes=$2 forms=$3 shape form
    shift 3
    mkdir -p "$dir"
    for shape in ${shapes//,/ }; do
        for form in ${forms//,/ }; do
            timeout -s INT -k 10 "${WARM_S:-200}" python3 benchmarks/norm_tiles.py --shapes "$shape" --forms "$form" \
                --fwd "" --bwd "" "$@" --no-check --out "$dir/$shape-$form" > "$dir/$shape-$form.log" 2>&1 &
        done
    done
}

# norm_tiles_ab NAME SHAPES FORMS SETTING...: benchmarks/norm_tiles.py's settings (--fwd-setting / --bwd-setting) at
# SHAPES x FORMS, the kernels built first (warm_norm_tiles), then one process times the settings in two alternating
# rounds (TIME_S seconds at most; results under $OUT/NAME, packed).
norm_tiles_ab() {
    local name=$1 shapes=$2 forms=$3
    shift 3
    warm_norm_tiles "$OUT/warm-$name" "$shapes" "$forms" "$@"
    wait
    packed "${TIME_S:-200}" "$name" python3 benchmarks/norm_tiles.py --shapes "$shapes" --forms "$forms" --fwd "" \
        --bwd "" "$@" --setting-rounds 2 --no-check --out "$OUT/$name"
}

# pack PACK: everything under $OUT into PACK/results.tar.gz (the device tool returns a few files only).
pack() {
    mkdir -p "$1" && tar czf "$1/results.tar.gz" -C "$OUT" .
}

# packed SECONDS NAME COMMAND...: step, then the results so far into $PACK/results.tar.gz (a call cut by its time
# limit still returns them; the runners set PACK first).
packed() {
    step "$@"
    pack "$PACK"
}

# te_fp8_ab: te-4layer's training step (4 layers, [8, 2048, 2048], issue 18): bf16 compile and torchao tensorwise
# compiled (the targets' baselines), then blockfuse's fused FP8 tensorwise block, default, +recompute and default
# again (a first run may take its samples while its kernels compile), this checkout's code (te-new-*) and, after
# old_code, the old one's (te-old-*).
te_fp8_ab() {
    local TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick) linear name
    step 60 te-bf16 python3 -m blockfuse bench block "${TE[@]}" --providers compile:default --out "$OUT/te-bf16"
    step 90 te-torchao python3 -m blockfuse bench block "${TE[@]}" --linear torchao:tensorwise \
        --providers compile:default --out "$OUT/te-torchao"
    for linear in fp8:tensorwise fp8:tensorwise+recompute fp8:tensorwise; do
        name=${linear#fp8:}
        [ -e "$OUT/te-new-$name.log" ] && name=$name-2
        step 45 "te-new-$name" python3 -m blockfuse bench block "${TE[@]}" --linear "$linear" --providers fused \
            --out "$OUT/te-new-$name"
        [ ${#OLD[@]} -gt 0 ] && step 45 "te-old-$name" "${OLD[@]}" python3 -m blockfuse bench block "${TE[@]}" \
            --linear "$linear" --providers fused --out "$OUT/te-old-$name"
    done
}
