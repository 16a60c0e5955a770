"""No secret in any output, as a user would check: an engine with a planted HF_TOKEN and
--api-key runs a whole session that writes every report and a baseline, and no file the session
leaves and no line it prints holds either value (pytest_llmperf/secrets.py).

The suites read the secrets from the environment, as a user's suite would (a literal in the
suite's source would be in the suite's own file and its bytecode cache, not leaked by us).
"""

from __future__ import annotations

import json
import shlex
import stat
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_llmperf import secrets
from pytest_llmperf.engines.kinds.vllm import LAUNCH
from pytest_llmperf.secrets import MARKER
from tests.conftest import REPO
from tests.plugin.gate_suite import CONFTEST

HF_TOKEN = "hf_planted_secret_123"
API_KEY = "sk-planted-456"
PLANTED = (HF_TOKEN, API_KEY)

SUITE = '''
import os
import pytest
from pytest_llmperf import Engine, Workload

pytestmark = pytest.mark.engine(Engine(
    model={model!r}, max_num_seqs=32, env={{"HF_TOKEN": os.environ["PLANTED_HF_TOKEN"]}},
    extra_args={{"api-key": os.environ["PLANTED_API_KEY"]}}{engine_extra}))

def test_a(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=10, num_requests=20,
                               concurrency=1, name="a"))
'''


def leaks(root: Path, *texts: str) -> list[str]:
    """Where a planted value shows: each file under `root` (by path) and each text given."""
    found = [str(path) for path in sorted(root.rglob("*")) if path.is_file()
             and any(value.encode() in path.read_bytes() for value in PLANTED)]
    return found + [text[:200] for text in texts if any(value in text for value in PLANTED)]


@pytest.fixture
def planted(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("PLANTED_HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("PLANTED_API_KEY", API_KEY)
    monkeypatch.setenv("FAKE_a", "0.1,0.01")
    yield pytester
    secrets.use_names(())  # the inner session's names stay with this process otherwise


def test_no_report_baseline_or_terminal_line_holds_a_secret(planted, monkeypatch):
    planted.makeconftest(CONFTEST)  # the measurement is injected; the rest is the real plugin
    planted.makepyfile(test_suite=SUITE.format(model="m", engine_extra=""))
    step = planted.path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    result = planted.runpytest(
        "-v", "--llmperf-summary", "full", "--llmperf-update-baselines",
        "--llmperf-json", "r.json", "--llmperf-markdown", "r.md", "--llmperf-html", "r.html",
        "--junitxml", "j.xml", "--llmperf-save", "saved")
    result.assert_outcomes(passed=1)
    written = {"r.json", "r.md", "r.html", "j.xml", "step.md", "baselines/cpu/test_suite.toml",
               ".llmperf/runs/saved.json", ".llmperf/history.sqlite"}  # the results store too
    assert written <= {str(p.relative_to(planted.path)) for p in planted.path.rglob("*")}
    assert leaks(planted.path, result.stdout.str(), result.stderr.str()) == []

    # Where the env and flags are shown, the marker is.
    label = f"m seqs=32 extra_args=api-key:{MARKER}"
    recorded = {"model": "m", "max_num_seqs": 32, "extra_args": {"api-key": MARKER},
                "env": {"HF_TOKEN": MARKER}}
    baseline = tomllib.loads((planted.path / "baselines/cpu/test_suite.toml").read_text())
    assert baseline["test_a"]["provenance"]["engine"] == recorded
    run = json.loads((planted.path / "r.json").read_text())
    results = run["llmperf"]["results"]
    assert [(r["engine"], r["engine_label"]) for r in results] == [(recorded, label)]
    assert f"engine m = {label}" in result.stdout.lines
    assert "- engine m = m seqs=32 extra\\_args=api-key:\\<redacted>" in \
        (planted.path / "r.md").read_text().splitlines()
    assert "<li>engine m = m seqs=32 extra_args=api-key:&lt;redacted&gt;</li>" in \
        (planted.path / "r.html").read_text()
    junit = ET.parse(planted.path / "j.xml").getroot()
    assert {p.get("name"): p.get("value") for p in junit.iter("property")}["engine"] == label

    # The recorded marker matches the same spec next run, whatever its token is now.
    monkeypatch.setenv("PLANTED_HF_TOKEN", "hf_rotated_789")
    again = planted.runpytest("--llmperf-require-baseline")
    again.assert_outcomes(passed=1)
    assert "another engine configuration" not in again.stdout.str()


FAKE_VLLM = """\
#!/bin/sh
# Stands in for the python of a vLLM install (Engine(python=...)): it logs its arguments, as
# vLLM logs its non-default args, then fails on the token, as vLLM does on a bad one.
echo "INFO non-default args: $*"
echo "ValueError: invalid Hugging Face token $HF_TOKEN"
exit 1
"""


def test_a_failed_start_quotes_no_secret_and_its_log_header_hides_them(planted):
    fake = planted.path / "fake-python"
    fake.write_text(FAKE_VLLM)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    model = REPO / "suites" / "models" / "tiny-llama-arch"  # config.json only: no tokenizer
    planted.makepyfile(test_suite=SUITE.format(model=str(model),
                                               engine_extra=f", python={str(fake)!r}"))
    logs = planted.path / "logs"
    result = planted.runpytest("-p", "no:cacheprovider", "--llmperf-log-dir", str(logs),
                               "--junitxml", "j.xml")
    result.assert_outcomes(failed=1)
    [log] = logs.glob("vllm-*.log")
    line = (f"vLLM engine 'tiny-llama-arch seqs=32 extra_args=api-key:{MARKER}' exited with "
            f"code 1: ValueError: invalid Hugging Face token {MARKER} (full log: {log})")
    assert line in result.stdout.str().replace("\n", "")
    lines = log.read_text().splitlines()
    header, env_line = lines[:2]
    # A "# cores:" line follows where the engine is pinned (under pytest-xdist, say).
    body = [line for line in lines[2:] if not line.startswith("# cores: ")]
    # Shell-quoted: the one-line program that runs vLLM's server module can be pasted as it is.
    assert header.startswith(f"$ {shlex.join([str(fake), '-c', LAUNCH])} --model {model} ")
    assert f" --api-key {MARKER} " in header
    assert env_line.startswith(f"# env: HF_TOKEN={MARKER} ")
    # The rest of the log is the engine's own output, as it printed it: the one file we do not
    # write ourselves, so it is the one that may hold them.
    assert API_KEY in body[0] and body[1] == f"ValueError: invalid Hugging Face token {HF_TOKEN}"
    assert leaks(planted.path, result.stdout.str()) == [str(log)]


USER_SUITE = '''
import os
import pytest
from pytest_llmperf import Engine, Workload

@pytest.mark.engine(Engine(model="m", env={"MY_PAT": os.environ["PLANTED_PAT"]}))
def test_a(llmperf):
    llmperf.run(Workload.fixed(input_tokens=8, output_tokens=10, num_requests=20,
                               concurrency=1, name="a"))
'''


def test_the_users_own_secret_names_from_the_ini(planted, monkeypatch):
    monkeypatch.setenv("PLANTED_PAT", "ghp_planted_789")
    planted.makeconftest(CONFTEST)
    planted.makepyfile(test_suite=USER_SUITE)
    planted.makeini("[pytest]\nllmperf_secret_names = MY_PAT, --license-file\n")
    planted.runpytest("--llmperf-json", "r.json").assert_outcomes(passed=1)
    [result] = json.loads((planted.path / "r.json").read_text())["llmperf"]["results"]
    assert result["engine"]["env"] == {"MY_PAT": MARKER}


def test_a_bad_secret_name_is_one_line_naming_where_it_came_from(planted, monkeypatch):
    monkeypatch.setenv("LLMPERF_SECRET_NAMES", "MY_PAT,two words")
    result = planted.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pytest-llmperf: $LLMPERF_SECRET_NAMES='MY_PAT,two words': 'two words' is not an "
        "environment variable or flag name; expected names such as MY_PAT,--license-file "
        "separated by commas"])
