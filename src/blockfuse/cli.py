"""The ``blockfuse`` command line."""

from __future__ import annotations

import argparse
import sys


def _cmd_env(args: argparse.Namespace) -> int:
    from blockfuse.envinfo import collect_env, format_env

    print(format_env(collect_env()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="blockfuse", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    env = commands.add_parser("env", help="versions, device, and which implementation each op uses")
    env.set_defaults(func=_cmd_env)

    from blockfuse.bench.cli import add_bench_parser

    add_bench_parser(commands)

    from blockfuse.analyze.cli import add_analyze_parser

    add_analyze_parser(commands)

    from blockfuse.bench.full_report import add_report_parser

    add_report_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
