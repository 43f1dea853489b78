# te-4layer FP8 delayed, eager and compiled, with the activations' inline-asm MUFU forms (1) and without (0)
source scripts/device_python.sh
export PYTHONUNBUFFERED=1
OUT=${OUT:?}
TE=(te-4layer --layers 4 --shape 8x2048x2048 --modes fwdbwd --quick)
python3 -m blockfuse env > "$OUT/env.log" 2>&1
run() {  # run NAME FAST_MUFU ARGS...
    local name=$1 fast=$2
    shift 2
    BLOCKFUSE_FAST_MUFU=$fast timeout 120 python3 -m blockfuse bench block "${TE[@]}" "$@" --out "$OUT/$name" 2>&1 \
        | tee >(grep -c "assuming every input is mutated" > "$OUT/$name.assumed-mutated") \
        | grep -v "triton_kernel_wrap.py" > "$OUT/$name.log"
    echo "$name done"
}
run bf16 1 --providers compile:default
run fast-1 1 --linear fp8:delayed --providers fused,fused+compile:default
run plain-1 0 --linear fp8:delayed --providers fused,fused+compile:default
run fast-2 1 --linear fp8:delayed --providers fused,fused+compile:default
sleep 1
for f in "$OUT"/*/*.md; do echo "$f"; grep -h "^| fused\|^| compile" "$f"; done
head -3 "$OUT"/*.assumed-mutated
