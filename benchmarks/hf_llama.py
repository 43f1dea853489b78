"""Moved into the package: ``blockfuse bench model hf-llama`` (``src/blockfuse/bench/hf_llama.py``).

This shim passes its arguments on, e.g. ``PYTHONPATH=src python benchmarks/hf_llama.py --quick --out DIR``.
The old ``--device``, ``--warmup-ms`` and ``--rep-ms`` are gone: the card is CUDA when there is one (else
the CPU and the tiny model), and ``--quick`` shortens the timing.
"""

import sys

from blockfuse.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "model", "hf-llama", *sys.argv[1:]]))
