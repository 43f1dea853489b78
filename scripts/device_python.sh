# Sourced by the scripts/*_gpu.sh runners (bash; the repository root is the current directory): puts the
# wheels carried in .whl/ (e.g. Liger-Kernel, installed into /tmp/site) and then src/ on PYTHONPATH.
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
