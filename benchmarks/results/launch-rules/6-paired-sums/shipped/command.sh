# run from the repository root with the old code in _gpu/old/src (git archive 9616fa6 src | tar x -C _gpu/old)
source scripts/device_python.sh
export PYTHONUNBUFFERED=1
write_env
SH=8192x1152,8192x4304,16384x4096,8192x2880
step 100 tiles-old env PYTHONPATH=$PWD/_gpu/old/src python3 benchmarks/norm_tiles.py --out $OUT/tiles-old --forms ln,ln-post,rms --fwd '' --bwd '4096;512;2;3' --shapes $SH --no-check
step 150 tiles-new python3 benchmarks/norm_tiles.py --out $OUT/tiles-new --forms ln,ln-post,rms --fwd '' --bwd '4096;512;2;3' --shapes $SH
