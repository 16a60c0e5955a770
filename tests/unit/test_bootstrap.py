"""`llmperf bootstrap-baselines` without an engine: its pytest command, the arguments after its
`--`, and the merge that adds only the tables the repository lacks (a committed table is kept
as it is)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytest_llmperf import bootstrap, cli
from pytest_llmperf.verdict import baselines

ENTRY = baselines.BaselineEntry(value=0.01, spread=0.001, direction="lower", tolerance=0.02, n=3,
                                spread_source="repeats")


def test_pytests_own_arguments_come_after_the_dashes():
    assert bootstrap.split_pytest_args(["bootstrap-baselines", "--marker", "cpu", "suites/", "--",
                                        "-k", "poisson"]) == (
        ["bootstrap-baselines", "--marker", "cpu", "suites/"], ["-k", "poisson"])
    # Another command's `--` is its own.
    assert bootstrap.split_pytest_args(["plot", "--", "a.json"]) == (["plot", "--", "a.json"], [])
    assert bootstrap.pytest_command("h200", 3, Path("/tmp/s"), ["suites/"], ["-x"]) == [
        sys.executable, "-m", "pytest", "-m", "h200", "suites/", "--llmperf-update-baselines",
        "--llmperf-repeat", "3", "--llmperf-baseline-dir=/tmp/s", "-x"]


def test_the_bootstraps_pytest_is_rooted_in_the_checkout_not_beside_its_scratch(tmp_path):
    """A scratch folder outside the checkout does not move pytest's rootdir to their common
    folder (the tables would name the model relative to that folder, and the next night, rooted
    in the checkout, would read another engine configuration)."""
    checkout, scratch = tmp_path / "checkout", tmp_path / "scratch"
    checkout.mkdir()
    scratch.mkdir()
    (checkout / "test_s.py").write_text("def test_a():\n    pass\n")
    command = bootstrap.pytest_command("cpu", 2, scratch, ["test_s.py"],
                                       ["--collect-only", "-p", "no:cacheprovider"])
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, timeout=120)
    assert f"rootdir: {checkout}\n" in done.stdout, done.stdout


def test_only_missing_tables_are_added_and_committed_ones_kept(tmp_path):
    scratch, target = tmp_path / "scratch", tmp_path / "baselines"
    for key in ("test_a", "test_b"):
        baselines.update_baseline(scratch / "cpu/test_s.toml", key, {"tpot_s.p50": ENTRY}, {})
    baselines.update_baseline(scratch / "h200-8gpu/test_g.toml", "test_tp8",
                              {"tpot_s.p50": ENTRY}, {})
    committed = target / "cpu/test_s.toml"
    committed.parent.mkdir(parents=True)
    committed.write_text('# measured by hand\n[test_a.metrics."tpot_s.p50"]\nvalue = 0.5\n'
                         'spread = 0.0\nn = 1\ndirection = "lower"\ntolerance = 0.1\n')
    merged = bootstrap.merge_new_tables(scratch, target)
    assert merged.added == {committed: ["test_b"], target / "h200-8gpu/test_g.toml": ["test_tp8"]}
    assert merged.new_files == [target / "h200-8gpu/test_g.toml"] and merged.kept == 1
    assert baselines.load_baseline(committed, "test_a").metrics["tpot_s.p50"].value == 0.5
    assert baselines.load_baseline(committed, "test_b").metrics["tpot_s.p50"].n == 3
    assert committed.read_text().startswith("# measured by hand\n")


def test_fewer_than_two_repeats_is_one_line(capsys):
    assert cli.main(["bootstrap-baselines", "--marker", "cpu", "--repeats", "1"]) == 2
    assert capsys.readouterr().err == ("llmperf: error: --repeats 1: give 2 or more (the tables "
                                       "keep their spread)\n")


def test_the_suites_default_to_the_nightlys_and_the_hint_names_them(tmp_path, monkeypatch,
                                                                     capsys):
    """No suite given: pytest runs suites/ as `llmperf nightly` does (pyproject's testpaths is
    tests/, where no test is marked for hardware), and the rewrite hint names the path."""
    monkeypatch.chdir(tmp_path)
    baselines.update_baseline(tmp_path / "baselines/h200-8gpu/test_g.toml", "test_a",
                              {"tpot_s.p50": ENTRY}, {})
    ran = []

    def fake_pytest(command, check):
        ran.append(command)
        scratch = Path(command[-1].removeprefix("--llmperf-baseline-dir="))
        baselines.update_baseline(scratch / "h200-8gpu/test_g.toml", "test_a",
                                  {"tpot_s.p50": ENTRY}, {})
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(bootstrap.subprocess, "run", fake_pytest)
    assert cli.main(["bootstrap-baselines", "--marker", "h200"]) == 0
    assert ran[0][3:6] == ["-m", "h200", "suites/"]
    assert ("llmperf: 1 committed table kept; rewrite them with: pytest -m h200 suites/ "
            "--llmperf-update-baselines\n") in capsys.readouterr().out
