"""The launch: ``blockfuse bench model ... --nproc N`` re-runs itself under ``torch.distributed.run``
(torchrun), N processes on this machine on a free port, each a worker (``distributed.job``)."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Optional

import torch

from blockfuse.bench.distributed.settings import Settings, command


def card_name() -> str:
    import platform

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)}x{torch.cuda.device_count()}"
    return f"CPU ({platform.machine() or 'unknown'})"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(settings: Settings, out: Path, timeout: Optional[float] = None, log: Optional[Path] = None) -> int:
    """Runs ``settings`` under ``torch.distributed.run`` (``nproc`` processes on this machine, a free port), its
    output to ``log`` (a file) when given; its exit status (124 when ``timeout`` seconds passed first, its
    processes then ended)."""
    import signal

    import blockfuse

    source = str(Path(blockfuse.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (source, os.environ.get("PYTHONPATH"))))}
    # NOTE: the host's cores shared among the processes (torchrun would set 1 and say so in a banner).
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // settings.nproc)))
    # NOTE: without --nproc, which torchrun's own parser would take for an abbreviation of its --nproc-per-node
    # (it reads the script's arguments too): a worker knows the world size from torchrun.
    words = shlex.split(command(settings, out))
    at = words.index("--nproc")
    del words[at:at + 2]
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(settings.nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), "-m", "blockfuse", *words[1:]]
    text = "launching: " + shlex.join(["torchrun", *argv[3:]])
    stream = None if log is None else log.open("w")
    if stream is None:
        print(text, flush=True)
    else:
        print(text, file=stream, flush=True)
    # its own session, so that a timeout ends torchrun and every worker it started
    process = subprocess.Popen(argv, env=env, stdout=stream, stderr=subprocess.STDOUT if stream else None,
                               start_new_session=timeout is not None)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return 124
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        if stream is not None:
            stream.close()
