"""Night after night on the real engine, into one results store, as a team's nightly runs.

Each night is a fresh pytest session (as on a runner whose checkout starts empty, except for
this machine's first-run baselines) measuring one unchanged test at the default tolerance,
with no committed table for this machine: only the first-run baseline and the trend gate
(`--llmperf-trend`) judge it. The engines are started once for the module and measured in
endpoint mode (`--llmperf-endpoint`), so a night costs one pytest session, not a vLLM start:

- SQLite: 20 unchanged nights give no failure; from night 21 every model step is 4 ms slower
  (tests/integration/slowdown) on another host (a real UTS namespace named `runner-7`, as a
  slower node of the same shape): caught within 3 nights, naming both hosts, red every night
  after; green once `llmperf ack` acknowledges it; red again when the acknowledgement expired.
- PostgreSQL (a real server, tests/history_db.py): the same from night 5 of 10.
- Episodes: `llmperf nightly` eight nights (slowed 4-6), each change posted opened once and
  resolved once, a summary line a night, and a runner shape that stopped posted stale once.
- Accepted: 12 ms a step slower from night 9, red once caught; `llmperf accept` makes it the
  new normal (the series' level moves: the next slowed night is green, saying the level
  accepted), and 12 ms a step more (24 ms in all) is red again within 3 nights.

Nightly (docs/testing.md): about 40 pytest sessions, ~7 minutes. The same gate logic runs in CI
with injected measurements (tests/plugin/test_acks_plugin.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import select, update

from pytest_llmperf import cli
from pytest_llmperf.engines.server import VllmServer
from pytest_llmperf.history import location, schema
from pytest_llmperf.history.store import HistoryStore
from tests.conftest import REPO, requires_vllm, shared_engine
from tests.webhook_receiver import Receiver

pytestmark = [requires_vllm, pytest.mark.nightly]

SLOWDOWN = REPO / "tests" / "integration" / "slowdown"
STEP_DELAY_S = 0.004  # the "4 ms per step"
EPISODE_DELAY_S = 0.012
CAUGHT_WITHIN = 3  # nights
# A slower step moves these first; which of them leave their band first is the night's noise.
DECODE_SPEED = {"tpot_s.p50", "tpot_s.p90", "e2el_s.p50", "output_throughput_tok_s"}
SUITE = """
import pytest
from pytest_llmperf import Workload
from suites.tiny import TINY_CPU

@pytest.mark.cpu
@pytest.mark.engine(TINY_CPU)
def test_decode(llmperf):
    llmperf.run(Workload.fixed(input_tokens=32, output_tokens=32, num_requests=32,
                               concurrency=4, seed=49))
"""
TEST = "test_nights.py::test_decode"
VERDICT_LINE = re.compile(r"regressed|changed for the worse|DISTURBED|^FAILED|^E ")
WORSE = re.compile(r"^(\S+) changed for the worse at run (\d+)", re.MULTILINE)


def _slowed(tmp_path_factory, delay_s: float):
    """TINY_CPU on a vLLM whose every model step sleeps `delay_s` first."""
    with ExitStack() as stop_on_leaving:
        with pytest.MonkeyPatch.context() as patch:  # the slowdown in its start's environment only
            patch.setenv("PYTHONPATH", os.pathsep.join([str(SLOWDOWN), str(REPO)]))
            patch.setenv("LLMPERF_INDUCED_STEP_DELAY_S", str(delay_s))
            server = stop_on_leaving.enter_context(
                shared_engine(tmp_path_factory.mktemp("slowed-engine")))
        yield server


@pytest.fixture(scope="module")
def slowed_server(tmp_path_factory):
    """4 ms a step slower: "the new release"."""
    yield from _slowed(tmp_path_factory, STEP_DELAY_S)


@pytest.fixture(scope="module")
def further_slowed_server(tmp_path_factory):
    """24 ms a step slower: the release after an accepted 12 ms one, as much worse again."""
    yield from _slowed(tmp_path_factory, 2 * EPISODE_DELAY_S)


@pytest.fixture(scope="module")
def much_slower_server(tmp_path_factory):
    """12 ms a step slower (TPOT about twice the unchanged): a change two nights on either side
    of it tell apart on this machine (see the episodes test)."""
    yield from _slowed(tmp_path_factory, EPISODE_DELAY_S)


class Nights:
    """One team's checkout and store: `night(url)` runs the suite once against a server."""

    def __init__(self, where: Path, store: str):
        self.where, self.store = where, store
        (where / "test_nights.py").write_text(SUITE)
        self.outcomes: list[str] = []

    def night(self, server: VllmServer, host: str | None = None, *more: str) -> str:
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                   "-rfE", "--llmperf-endpoint", server.base_url, "--llmperf-hardware", "cpu",
                   "--llmperf-history", self.store, "--llmperf-trend", *more]
        if host:  # a real host name: this night's own UTS namespace
            command = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host,
                       *command]
        done = subprocess.run(command, cwd=self.where, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]
        self.outcomes.append("red" if done.returncode else "green")
        # Each night's report, kept: what a red night said is the assertion's message.
        (self.where / f"night-{len(self.outcomes)}.txt").write_text(done.stdout)
        return done.stdout

    def said(self, nights: list[int]) -> str:
        lines = (line for n in nights
                 for line in (self.where / f"night-{n}.txt").read_text().splitlines()
                 if VERDICT_LINE.search(line))
        return "\n".join(lines)

    def red_nights(self) -> list[int]:
        return [n for n, outcome in enumerate(self.outcomes, 1) if outcome == "red"]

    def ack(self, metrics: set[str], capsys) -> None:
        capsys.readouterr()
        for metric in sorted(metrics):
            assert cli.main(["ack", TEST, "--metric", metric, "--reason", "the new release's "
                             "scheduler; tracked upstream", "--history", self.store]) == 0
        said = capsys.readouterr().out
        assert said.count("acknowledged by ") == len(metrics), said

    def expire_acks(self) -> None:
        """Every acknowledgement of the store, as time would leave it: past its date now."""
        store = HistoryStore.open(location.resolve(self.store, self.where))
        try:
            with store._engine.begin() as connection:  # no API moves a date: time does
                connection.execute(update(schema.acks).values(until=datetime.now(timezone.utc)))
        finally:
            store.close()

def slowdown_then_ack(nights: Nights, server, slowed, unchanged: int, capsys,
                      host: str | None = None) -> str:
    """`unchanged` nights, then slowed ones until caught plus two more; acknowledged, expired.
    Returns the report of the first red night."""
    for _ in range(unchanged):
        nights.night(server)
    assert nights.red_nights() == [], (f"unchanged nights failed: {nights.outcomes}\n"
                                       + nights.said(nights.red_nights()))
    for _ in range(CAUGHT_WITHIN + 2):
        nights.night(slowed, host)
    red = nights.red_nights()
    assert red and red[0] <= unchanged + CAUGHT_WITHIN, nights.outcomes
    assert red == list(range(red[0], len(nights.outcomes) + 1)), "red every night once found"
    red_output = "\n".join((nights.where / f"night-{n}.txt").read_text() for n in red)
    metrics = {m.group(1) for m in WORSE.finditer(red_output)}
    assert metrics & DECODE_SPEED, red_output[-3000:]

    nights.ack(metrics, capsys)
    green = nights.night(slowed, host)
    assert nights.outcomes[-1] == "green", green[-3000:]
    nights.expire_acks()
    again = nights.night(slowed, host)
    assert nights.outcomes[-1] == "red" and "expired: acknowledged by " in again, again[-3000:]
    return (nights.where / f"night-{red[0]}.txt").read_text()


def test_twenty_unchanged_nights_pass_and_a_4ms_step_on_another_host_stays_red(
        tmp_path, tiny_server, slowed_server, capsys):
    nights = Nights(tmp_path, str(tmp_path / "nights.sqlite"))
    output = slowdown_then_ack(nights, tiny_server, slowed_server, 20, capsys, host="runner-7")
    flat = " ".join(output.split())
    assert re.search(r"what changed at run 21: host \S+ -> runner-7", flat), output[-3000:]
    print(f"nights: {nights.outcomes}")  # docs/noise.md takes the numbers from -s runs


def test_a_slowdown_from_night_5_stays_red_in_postgresql(tmp_path, tiny_server, slowed_server,
                                                         postgres_db, capsys):
    slowdown_then_ack(Nights(tmp_path, postgres_db), tiny_server, slowed_server, 4, capsys)


def test_an_accepted_slowdown_is_the_new_normal_and_a_further_one_still_fails(
        tmp_path, tiny_server, much_slower_server, further_slowed_server, capsys):
    """`llmperf accept` on a real store: eight unchanged nights, then 12 ms a step slower until
    the trend gate is red and one night more; each metric it names accepted; the next slowed
    night is green against the level accepted, and 24 ms a step (12 more) is red again.
    12 ms, not 4: on this machine's noise a 4 ms step was not called within three nights, after
    three unchanged nights (TPOT 12.0, 12.1, 11.9 then 15.9, 19.3, 16.4 ms) nor after eight
    (TPOT 8.8-12.9 ms, then 15.9-16.7): the series' run-to-run noise, measured from its
    consecutive runs, made the rule's floor (3 of them) about 1.9x (tried, 2026-11-30)."""
    nights = Nights(tmp_path, str(tmp_path / "nights.sqlite"))
    unchanged = 8
    for server in [tiny_server] * unchanged:
        nights.night(server)
    assert nights.red_nights() == [], nights.said(nights.red_nights())
    while len(nights.outcomes) < unchanged + CAUGHT_WITHIN and not nights.red_nights():
        nights.night(much_slower_server)
    red = nights.red_nights()
    assert red, f"a 12 ms step not caught in {CAUGHT_WITHIN} nights: {nights.outcomes}"
    nights.night(much_slower_server)  # one night more at the new level before it is accepted
    red_output = "\n".join((nights.where / f"night-{n}.txt").read_text()
                           for n in nights.red_nights())
    metrics = sorted({m.group(1) for m in WORSE.finditer(red_output)})
    assert set(metrics) & DECODE_SPEED, red_output[-3000:]
    capsys.readouterr()
    for metric in metrics:
        assert cli.main(["accept", TEST, "--metric", metric, "--reason", "the new release's "
                         "scheduler, measured and agreed", "--history", nights.store]) == 0
        said = capsys.readouterr().out
        assert f"{TEST} {metric}: accepted as the new level by " in said, said
    accepted = nights.night(much_slower_server, None, "-v")
    assert nights.outcomes[-1] == "green", accepted[-3000:]
    assert "accepted as the new level by " in accepted, accepted[-3000:]
    settled = len(nights.outcomes)
    while len(nights.outcomes) < settled + CAUGHT_WITHIN and nights.outcomes[-1] == "green":
        nights.night(further_slowed_server)
    assert nights.outcomes[-1] == "red", (
        f"12 ms a step more, after the accepted level, not caught in {CAUGHT_WITHIN} nights: "
        f"{nights.outcomes}")
    print(f"accept nights: {nights.outcomes}\n" + nights.said([len(nights.outcomes)]))


# The medians and throughput gated, as the CPU suite gates them (suites/tiny.py's CPU_GATED):
# tail percentiles of 32 requests on two shared cores move a night's p90 by 20% unchanged.
EPISODE_SUITE = SUITE.replace(
    "@pytest.mark.cpu\n", "@pytest.mark.cpu\n@pytest.mark.h100\n"
    "@pytest.mark.llmperf(gate=['ttft_s.p50', 'tpot_s.p50', 'e2el_s.p50', "
    "'output_throughput_tok_s'])\n")


def test_eight_nights_of_episodes_post_each_change_once_and_a_stopped_shape_once(
        tmp_path, tiny_server, much_slower_server, monkeypatch):
    """`llmperf nightly` with LLMPERF_EPISODES=1 and LLMPERF_NIGHT_SUMMARY=1, as a deploy file
    runs it, eight nights on the real engine (unchanged 1-3, 12 ms a step slower 4-6, back 7-8)
    into one store: each episode opened once and resolved once, the slowed decode among them; a
    summary line every night. 12 ms, not the other tests' 4: with two nights back, the trend
    rule (docs/history.md) must tell the return from this machine's noise: with TPOT p50 at
    11.4-13.5 ms over five unchanged nights here, a 4 ms step (+35%) back for two nights was
    still red on night 8 (tried). Then the clock moves two days on (the store's runs made older)
    and a night of another runner shape (an H100 by the hardware override) posts the stopped
    CPU shape as stale, once."""
    folder, store = tmp_path / "checkout", tmp_path / "store" / "history.sqlite"
    folder.mkdir()
    store.parent.mkdir()
    (folder / "test_nights.py").write_text(EPISODE_SUITE)
    monkeypatch.chdir(folder)
    for name in ("GITHUB_RUN_ID", "GITHUB_STEP_SUMMARY", "CI_JOB_URL", "BUILD_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("LLMPERF_EPISODES", "1")
    monkeypatch.setenv("LLMPERF_NIGHT_SUMMARY", "1")

    def night(server: VllmServer, marker: str = "cpu") -> int:
        return cli.main(["nightly", "--marker", marker, "--store", str(store), "--out",
                         f"reports/{marker}", "--publish", "site", "--suites", "test_nights.py",
                         "--", "-p", "no:cacheprovider", "-p", "no:randomly",
                         "--llmperf-endpoint", server.base_url, "--llmperf-hardware", marker])

    with Receiver() as receiver:
        monkeypatch.setenv("LLMPERF_WEBHOOK_URL", receiver.url)
        codes = [night(server) for server in [tiny_server] * 3 + [much_slower_server] * 3
                 + [tiny_server] * 2]
        texts = [body["text"] for _, body in receiver.bodies]
        summaries = [t for t in texts if t.startswith("llmperf nightly -m cpu: ")]
        assert len(summaries) == 8, texts
        assert codes[:3] == [0, 0, 0] and 1 in codes[3:6] and codes[-1] == 0, (codes, texts)
        events = [t for t in texts if t.startswith(("opened: ", "resolved"))]
        opened = [t.removeprefix("opened: ") for t in events if t.startswith("opened: ")]
        resolved = [t for t in events if t.startswith("resolved")]
        assert opened and len(resolved) == len(opened) == len(set(opened)), events
        assert any(metric in line for line in opened for metric in DECODE_SPEED), events

        # Two days later, only the H100 shape runs: the CPU shape stopped.
        stamp = HistoryStore.open(location.resolve(str(store), folder))
        try:
            with stamp._engine.begin() as connection:  # no API moves a date: time does
                runs = schema.runs
                for run_id, started in connection.execute(select(runs.c.id, runs.c.started_at)):
                    connection.execute(update(runs).where(runs.c.id == run_id).values(
                        started_at=started - timedelta(days=2)))
        finally:
            stamp.close()
        before = len(receiver.bodies)
        assert night(tiny_server, "h100") == 0
        stale = [body["text"] for _, body in receiver.bodies[before:]
                 if body["text"].startswith("stale: runner shape cpu-")]
    assert len(stale) == 1 and stale[0].endswith("interval 36 h)"), receiver.bodies[before:]
