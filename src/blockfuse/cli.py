"""blockfuse: fused Triton kernels for transformer blocks, and what torch.compile does to them.

Commands: env (versions, device, each op's implementation), bench (speed, memory and error against
peers), analyze (what torch.compile did to a block), report (every benchmark, one report)."""

from __future__ import annotations

import argparse
import sys

from blockfuse.cliutil import UsageError


def _cmd_env(args: argparse.Namespace) -> int:
    from blockfuse.envinfo import collect_env, format_env

    print(format_env(collect_env()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="blockfuse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    env = commands.add_parser("env", help="versions, device, and which implementation each op uses")
    env.set_defaults(func=_cmd_env)

    from blockfuse.bench.cli import add_bench_parser

    add_bench_parser(commands)

    from blockfuse.analyze.cli import add_analyze_parser

    add_analyze_parser(commands)

    from blockfuse.bench.full_report.command import add_report_parser

    add_report_parser(commands)
    return parser


def _command_name(args: argparse.Namespace) -> str:
    words = ["blockfuse", getattr(args, "command", None), getattr(args, "bench_command", None)]
    return " ".join(w for w in words if w)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as error:
        # NOTE: bad input is one line on stderr and exit status 2 (argparse's own), never a traceback.
        print(f"{_command_name(args)}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
