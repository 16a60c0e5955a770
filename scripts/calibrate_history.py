"""Calibrate the change-point rule (pytest_llmperf/history/changepoints.py) on this machine's
real noise, and run the real 12-run series, as docs/history.md reports them.

    .venv/bin/python scripts/calibrate_history.py series --out .llmperf/calibration
    .venv/bin/python scripts/calibrate_history.py analyze --out .llmperf/calibration

`series` runs a small CPU suite (the tiny engine; a closed loop and a Poisson load) as
--unchanged + --slowed separate pytest sessions, each in a fresh folder as on an ephemeral runner
(no first-run baseline survives; only the results store, a SQLite file under --out, remembers),
with the trend gate on. From run --unchanged + 1 on, the folder's conftest.py makes every vLLM
model step sleep --slow x the unchanged runs' TPOT p50 (tests/integration/slowdown), so TPOT
grows by about that much; the folder is a git repository whose commit is the same for the
unchanged runs and another one from the step on, as if a commit had made vLLM slower. Each run
prints its outcome and the trend gate's lines.

`analyze` builds --series series per gated metric from those runs' files by drawing runs with
replacement: unchanged series of --length runs (any change found is a false alarm), and step
series of --length unchanged runs followed by 3 slowed ones (the step must be found at its first
run when 1, 2 or 3 runs of the new level are seen), at the rule's minimum effect --min-effect
(the gate's default tolerance, 0.1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SLOWDOWN = REPO / "tests" / "integration" / "slowdown"
GATED = ("ttft_s.p50", "tpot_s.p50", "e2el_s.p50", "output_throughput_tok_s")
# The gate's default tolerance (0.1), not the CPU suite's 1.5: that is the trend gate's minimum
# effect, and a factor of 2.5 would hide the +25% step. In a fresh folder no baseline gates.
SUITE = '''
import pytest
from pytest_llmperf import Workload
from suites.tiny import CPU_GATED, TINY_CPU

pytestmark = [pytest.mark.engine(TINY_CPU), pytest.mark.llmperf(gate=CPU_GATED)]

def test_closed_loop(llmperf):
    llmperf.run(Workload.fixed(input_tokens=64, output_tokens=32, num_requests=48,
                               concurrency=8, warmup_requests=4))

def test_poisson(llmperf):
    llmperf.run(Workload.fixed(input_tokens=64, output_tokens=32, num_requests=32,
                               rate=6.0, seed=1, warmup_requests=4))
'''


GIT_ENV = {"GIT_AUTHOR_NAME": "calibration", "GIT_AUTHOR_EMAIL": "c@c",
           "GIT_COMMITTER_NAME": "calibration", "GIT_COMMITTER_EMAIL": "c@c",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
SLOWER = f"""
import os
os.environ["PYTHONPATH"] = os.pathsep.join([{str(SLOWDOWN)!r}, {str(REPO)!r}])
os.environ["LLMPERF_INDUCED_STEP_DELAY_S"] = "{{delay:.6f}}"
"""


def checkout(delay: float | None) -> Path:
    """A fresh folder holding the suite (and, with a delay, the slower conftest), committed."""
    folder = Path(tempfile.mkdtemp(prefix="llmperf-history-cal-"))
    (folder / "test_history_cal.py").write_text(SUITE)
    if delay is not None:
        (folder / "conftest.py").write_text(SLOWER.format(delay=delay))
    env = {**os.environ, **GIT_ENV}
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "suite"]):
        subprocess.run(["git", *command], cwd=folder, env=env, check=True)
    return folder


FOREIGN = ("pytest", "vllm", "cc1plus")  # another test run, engine or build on the machine


def _parent(pid: str) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return None


def foreign_work() -> list[str]:
    """Processes of others' test runs, engines or builds (not this script's descendants)."""
    mine, found = str(os.getpid()), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if not any(word in cmdline for word in FOREIGN):
            continue
        ancestor = pid
        while ancestor not in (None, "0", "1", mine):
            ancestor = _parent(ancestor)
        if ancestor != mine:
            found.append(f"{pid} {cmdline[:80]}")
    return found


class Watch:
    """Samples foreign_work() every 2 s while a session runs: a run that overlapped another's
    work is taken again, so the noise measured is this machine's own."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            self.seen += foreign_work()

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def wait_for_quiet() -> None:
    while foreign_work():
        time.sleep(30)


def _unusable(document: dict) -> str | None:
    """Why a run is no point of the series: an engine that did not start (no result), or a
    measurement the plugin judged DISTURBED or CLIENT LIMITED."""
    results = document.get("llmperf", {}).get("results", [])
    if len(results) < 2:
        return "not measured"
    verdicts = {result.get("verdict") for result in results} & {"DISTURBED", "CLIENT LIMITED"}
    return f"{verdicts.pop()} run" if verdicts else None


def run_quietly(out: Path, name: str, delay: float | None, tries: int = 8) -> dict:
    """run_session in a fresh checkout, taken again while another's work overlapped it."""
    store, attempt = out / "history.sqlite", out / "attempt.sqlite"
    for _ in range(tries):
        wait_for_quiet()
        attempt.unlink(missing_ok=True)
        if store.exists():  # an overlapped run must not stay in the series: it runs on a copy
            shutil.copy(store, attempt)
        with Watch() as watch:
            document = run_session(out, name, checkout(delay), attempt)
        unusable = _unusable(document)
        if not watch.seen and not unusable:
            os.replace(attempt, store)
            return document
        print(f"    {unusable or 'overlapped ' + watch.seen[0]}; taken again", flush=True)
    raise SystemExit(f"{name}: every try overlapped another's work; try again later")


def run_session(out: Path, name: str, folder: Path, store: Path) -> dict:
    """One pytest session of the suite in `folder` with the results store `store`, the trend
    gate on."""
    run_json = out / f"{name}.json"
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "test_history_cal.py", "-q", "-p", "no:cacheprovider",
         "--rootdir", str(folder), f"--llmperf-json={run_json}", "--llmperf-trend",
         f"--llmperf-history={store}"],
        cwd=folder, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if "changed for the worse" in line
             or line.startswith(("FAILED", "history:"))]
    print(f"{name}: exit {proc.returncode}, {time.monotonic() - began:.0f} s", flush=True)
    for line in lines:
        print(f"    {line}", flush=True)
    return json.loads(run_json.read_text()) if run_json.is_file() else {}


def values(document: dict) -> dict[tuple[str, str], float]:
    """(test key, metric) -> value of one run file; CLIENT LIMITED results are left out."""
    out = {}
    for result in document.get("llmperf", {}).get("results", []):
        if result.get("verdict") in ("CLIENT LIMITED", "DISTURBED"):
            continue
        for name in GATED:
            value = result["metrics"].get(name, {}).get("value")
            if value:
                out[(result["key"], name)] = value
    return out


def pool(out: Path, prefix: str) -> list[dict]:
    return [values(json.loads(path.read_text())) for path in sorted(out.glob(f"{prefix}-*.json"))]


def series(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    for index in range(args.unchanged):
        run_quietly(args.out, f"unchanged-{index:02d}", None)
    tpot = statistics.median(v for run in pool(args.out, "unchanged")
                             for (_, name), v in run.items() if name == "tpot_s.p50")
    delay = args.slow * tpot
    print(f"from run {args.unchanged + 1} on every model step sleeps {delay * 1e3:.3f} ms "
          f"({args.slow:.0%} of the unchanged TPOT p50 {tpot * 1e3:.3f} ms)", flush=True)
    for index in range(args.slowed):
        run_quietly(args.out, f"slowed-{index:02d}", delay)


def analyze(args: argparse.Namespace) -> None:
    from pytest_llmperf.history.changepoints import find_changes

    unchanged, slowed = pool(args.out, "unchanged"), pool(args.out, "slowed")
    rng = np.random.default_rng(args.seed)
    print(f"{len(unchanged)} real unchanged runs, {len(slowed)} real slowed runs; "
          f"{args.series} resampled series of {args.length} runs each; min effect "
          f"{args.min_effect}")
    print(f"{'test':<18} {'metric':<24} {'noise':>6} {'step':>6} {'false':>6} {'found':>6}")
    for key_name in sorted({k for run in unchanged for k in run}):
        base = np.array([run[key_name] for run in unchanged if key_name in run])
        after = np.array([run[key_name] for run in slowed if key_name in run])
        false = sum(bool(find_changes(draw(rng, base, args.length), args.min_effect))
                    for _ in range(args.series))
        found = sum(_found(find_changes, rng, base, after, args) for _ in range(args.series)) \
            if len(after) else 0
        noise = np.median(np.abs(np.diff(np.log(base)))) * 1.4826 / np.sqrt(2)
        step = np.median(after) / np.median(base) - 1 if len(after) else float("nan")
        print(f"{key_name[0]:<18} {key_name[1]:<24} {noise:>6.1%} {step:>+6.1%} "
              f"{false:>3}/{args.series} {found:>3}/{args.series}")


def draw(rng, pool: np.ndarray, size: int) -> np.ndarray:
    """`size` runs drawn from the real runs `pool` by a smoothed bootstrap (Silverman's
    bandwidth, variance kept: Efron & Tibshirani, An Introduction to the Bootstrap, 16.4;
    https://en.wikipedia.org/wiki/Bootstrapping_(statistics)#Smooth_bootstrap): a plain resample
    of six values repeats them exactly, as real runs never do, and the change-point rule, which
    reads its noise from the differences of consecutive runs, would see a quieter series than
    the machine makes."""
    logs = np.log(pool)
    mean, sd = logs.mean(), logs.std(ddof=1)
    bandwidth = 1.06 * sd * len(logs) ** -0.2
    noisy = rng.choice(logs, size) + rng.normal(0.0, bandwidth, size)
    return np.exp(mean + (noisy - mean) / np.sqrt(1 + bandwidth ** 2 / max(sd, 1e-12) ** 2))


def _found(find_changes, rng, base, after, args) -> bool:
    """Is the step found at its first run, with 1, 2 or 3 runs of the new level seen?"""
    series = np.concatenate([draw(rng, base, args.length), draw(rng, after, 3)])
    return any(any(change.index == args.length
                   for change in find_changes(series[:args.length + seen], args.min_effect))
               for seen in (1, 2, 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("series", "analyze"))
    parser.add_argument("--out", type=Path, default=REPO / ".llmperf" / "calibration")
    parser.add_argument("--unchanged", type=int, default=6)
    parser.add_argument("--slowed", type=int, default=6)
    parser.add_argument("--slow", type=float, default=0.25)
    parser.add_argument("--series", type=int, default=20)
    parser.add_argument("--length", type=int, default=20)
    parser.add_argument("--min-effect", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out = args.out.resolve()  # the sessions run in other folders
    series(args) if args.command == "series" else analyze(args)


if __name__ == "__main__":
    main()
