"""Run `llmperf bisect` over five interpreters of one install, the fourth and fifth slowed by
--delay seconds a model step (tests/integration/slowdown), at the command's defaults, --runs
times, each from an empty results store; print each search's finding, its steps and the pairs
each took. The search is right when it names the fourth as first bad and the third as last good.

    .venv/bin/python scripts/calibrate_bisect.py --runs 10   # docs/bisect.md has the outcomes

The environments are venvs whose site-packages reach this one's (make_environment, which
tests/integration/test_bisect_real.py uses too): the same vLLM in each, five interpreters.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SLOWDOWN = REPO / "tests" / "integration" / "slowdown"
SUITE = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

@pytest.mark.engine(TINY_CPU)
@pytest.mark.llmperf(gate=["tpot_s.p50"])
def test_decode(llmperf):
    llmperf.run(Workload.fixed(input_tokens=32, output_tokens=32, num_requests=8,
                               concurrency=4, warmup_requests=1))
"""
# Two engines and a client on 2 cores can trip the client's self-check; the verdict is the point.
STEP_ARGS = "--llmperf-client-check warn"


def make_environment(where: Path, *, step_delay_s: float = 0.0) -> Path:
    """A venv that runs this environment's packages; with a delay, every vLLM model step in it
    sleeps that long (the slowdown hook, switched on by its .pth file)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(where), "platbase": str(where)})["purelib"])
    ours = sysconfig.get_paths()["purelib"]
    (site / "llmperf_reach.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    if step_delay_s:
        (site / "zz_planted_slowdown.pth").write_text(
            f"import os; os.environ['LLMPERF_INDUCED_STEP_DELAY_S'] = '{step_delay_s}'\n"
            f"{SLOWDOWN}\n")
    return where / "bin" / "python"


def one_search(where: Path, environments: list[Path], extra: list[str]) -> dict:
    started = time.monotonic()
    command = [sys.executable, "-m", "pytest_llmperf.cli", "bisect", "test_planted.py::test_decode",
               *map(str, environments), "--pytest-args", STEP_ARGS,
               "--history", str(where / f"history-{time.time_ns()}.sqlite"), *extra]
    done = subprocess.run(command, cwd=where, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = done.stdout.splitlines()
    steps = [line for line in lines if line.startswith("bisect step")]
    return {"code": done.returncode, "minutes": (time.monotonic() - started) / 60,
            "finding": next((line for line in lines if line.startswith("bisect of")), "?"),
            "names": next((line for line in lines if line.startswith("first bad:")), ""),
            "steps": [re.sub(r"/\S*/env-", "env-", line) for line in steps],
            "grown": [line for line in lines if "unsettled after" in line],
            "tail": done.stdout[-2000:] + done.stderr[-2000:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.003, help="seconds a step (default 3 ms)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("bisect_args", nargs="*", help="more `llmperf bisect` options, after --")
    args = parser.parse_args()
    where = args.out or Path(tempfile.mkdtemp(prefix="calibrate-bisect-"))
    where.mkdir(parents=True, exist_ok=True)
    (where / "test_planted.py").write_text(SUITE)
    environments = [make_environment(where / f"env-{i}", step_delay_s=args.delay if i >= 3
                                     else 0.0) for i in range(5)]
    right = 0
    for run in range(1, args.runs + 1):
        found = one_search(where, environments, args.bisect_args)
        ok = found["names"] == (f"first bad: {environments[3]}; last good: {environments[2]}")
        right += ok
        print(f"run {run}: {'right' if ok else 'WRONG'} in {found['minutes']:.1f} min, exit "
              f"{found['code']}: {found['finding']} | {found['names']}", flush=True)
        for line in found["grown"] + found["steps"]:
            print(f"    {line}", flush=True)
        if not found["steps"]:
            print(found["tail"], flush=True)
    print(f"{right} of {args.runs} searches named env-3 first bad and env-2 last good "
          f"(delay {args.delay * 1000:g} ms a step; work in {where})")


if __name__ == "__main__":
    main()
