source scripts/device_python.sh; export PYTHONUNBUFFERED=1
OLDP=(env PYTHONPATH=$PWD/_gpu/old/src:$PYTHONPATH)
echo "== probe, new"; python3 _gpu/probe.py 2>&1 | grep -v DEBUG | tail -4
echo "== probe, old"; "${OLDP[@]}" python3 _gpu/probe.py 2>&1 | grep -v DEBUG | tail -4
echo "== tests, new"; timeout 170 python3 -m pytest -q -p no:cacheprovider -n 4 -rfE tests/ops/test_copy.py "tests/models/test_blocks.py::test_fused_block_on_cuda_is_as_accurate_as_eager" > $OUT/tests-new.log 2>&1; grep -v DEBUG $OUT/tests-new.log | grep -E "passed|failed|FAILED|Error" | tail -8
echo "== new test, old code"; "${OLDP[@]}" timeout 60 python3 -m pytest -q -p no:cacheprovider -k inductor tests/ops/test_copy.py > $OUT/tests-old.log 2>&1; grep -v DEBUG $OUT/tests-old.log | grep -E "passed|failed|FAILED|Mismatch" | tail -6
