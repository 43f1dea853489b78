source scripts/device_python.sh
export PYTHONUNBUFFERED=1
write_env
SH=8192x1152,8192x2880,8192x4304,16384x4096,32768x1152
step 150 tiles-old env PYTHONPATH=$PWD/_gpu/old/src python3 benchmarks/norm_tiles.py --out $OUT/tiles-old --forms ln,ln-pre,ln-post,rms --fwd '' --bwd '4096;512;2;3' --shapes $SH --no-check
step 200 tiles-new python3 benchmarks/norm_tiles.py --out $OUT/tiles-new --forms ln,ln-pre,ln-post,rms --fwd '' --bwd '4096;512;2;3' --shapes $SH
step 120 chunked python3 benchmarks/norm_tiles.py --out $OUT/chunked --forms ln,rms --fwd '' --bwd '' --shapes 8192x4304,8192x2880,32768x1152 --chunked '512,1024;4096,8192;512' --no-check
grep -h "^(" $OUT/tiles-old.log $OUT/tiles-new.log $OUT/chunked.log
