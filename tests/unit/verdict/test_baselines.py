"""Baseline files: layout, exact error messages, engine mismatch, atomic and concurrent writes."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import tomllib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pytest_llmperf.reports.runfile import write_run
from pytest_llmperf.reports.saved_runs import RunFileError, load_run
from pytest_llmperf.verdict import baselines
from pytest_llmperf.verdict.baselines import (
    Baseline,
    BaselineEntry,
    BaselineError,
    engine_mismatch,
    load_baseline,
    make_provenance,
    update_baseline,
)

TTFT = BaselineEntry(value=0.21, spread=0.0041, direction="lower", tolerance=0.1, n=3)
TPUT = BaselineEntry(value=4310.0, spread=52.3, direction="higher", tolerance=0.1, n=3)
PROVENANCE = make_provenance(
    fingerprint={"device": "cpu", "count": 1, "driver": None, "vllm": "0.32.0"},
    engine={"model": "suites/models/tiny-llama", "max_num_seqs": 256, "enforce_eager": True},
    workload={"num_prompts": 64, "input_len": 128, "output_len": 64},
    commit="3f2c1e0",
    now=datetime(2026, 11, 22, 10, 4, 31, tzinfo=timezone.utc),
)
FIX = "fix the entry or regenerate it with --llmperf-update-baselines"

EXPECTED_FILE = """\
["test_fixed[64]".metrics.output_throughput_tok_s]
value = 4310.0
spread = 52.3
n = 3
direction = "higher"
tolerance = 0.1

["test_fixed[64]".metrics."ttft_s.p50"]
value = 0.21
spread = 0.0041
n = 3
direction = "lower"
tolerance = 0.1

["test_fixed[64]".provenance]
commit = "3f2c1e0"
date = "2026-11-22T10:04:31+00:00"

["test_fixed[64]".provenance.engine]
enforce_eager = true
max_num_seqs = 256
model = "suites/models/tiny-llama"

["test_fixed[64]".provenance.fingerprint]
count = 1
device = "cpu"
vllm = "0.32.0"

["test_fixed[64]".provenance.workload]
input_len = 128
num_prompts = 64
output_len = 64
"""


@pytest.fixture
def path(tmp_path, monkeypatch):
    # Relative, as the plugin shows it, so messages read "baselines/cpu/test_cpu.toml: ...".
    monkeypatch.chdir(tmp_path)
    return "baselines/cpu/test_cpu.toml"


def write(path: str, text: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")


def test_written_layout_is_the_documented_one(path):
    update_baseline(path, "test_fixed[64]", {"ttft_s.p50": TTFT, "output_throughput_tok_s": TPUT},
                    PROVENANCE)  # fmt: skip
    assert Path(path).read_text() == EXPECTED_FILE
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"


def test_round_trip(path):
    update_baseline(path, "test_fixed[64]", {"ttft_s.p50": TTFT}, PROVENANCE)
    baseline = load_baseline(path, "test_fixed[64]")
    assert baseline == Baseline({"ttft_s.p50": TTFT}, {
        "commit": "3f2c1e0",
        "date": "2026-11-22T10:04:31+00:00",
        "engine": {"enforce_eager": True, "max_num_seqs": 256, "model": "suites/models/tiny-llama"},
        "fingerprint": {"count": 1, "device": "cpu", "vllm": "0.32.0"},
        "workload": {"input_len": 128, "num_prompts": 64, "output_len": 64},
    }, path, "test_fixed[64]")  # fmt: skip
    assert baseline.where == 'baselines/cpu/test_cpu.toml :: "test_fixed[64]"'


def test_absent_file_or_test_gives_none(path):
    assert load_baseline(path, "test_fixed[64]") is None
    update_baseline(path, "test_fixed[64]", {"ttft_s.p50": TTFT}, {})
    assert load_baseline(path, "test_fixed[128]") is None


def test_update_keeps_other_tables_where_they_are_and_adds_new_ones_at_the_end(path):
    update_baseline(path, "test_fixed[64]", {"ttft_s.p50": TTFT}, {})
    update_baseline(path, "TestClass::test_a[x-y]", {"ttft_s.p50": TTFT}, {})
    update_baseline(path, "test_b", {"ttft_s.p50": TTFT}, {})
    newer = BaselineEntry(value=0.3, spread=0.0, direction="lower", tolerance=0.2, n=1)
    update_baseline(path, "test_fixed[64]", {"ttft_s.p50": newer}, {})
    document = tomllib.loads(Path(path).read_text())
    assert list(document) == ["test_fixed[64]", "TestClass::test_a[x-y]", "test_b"]
    assert load_baseline(path, "test_fixed[64]").metrics == {"ttft_s.p50": newer}
    assert load_baseline(path, "test_b").metrics == {"ttft_s.p50": TTFT}


def test_an_update_keeps_the_comments_a_user_wrote_in_the_file(path):
    update_baseline(path, "test_a", {"ttft_s.p50": TTFT, "output_throughput_tok_s": TPUT}, {})
    text = Path(path).read_text()
    text = "# Measured on the nightly runner, not a laptop.\n" + text.replace(
        "tolerance = 0.1\n", "tolerance = 0.5  # widened: TTFT of 16 requests swings\n", 1)
    Path(path).write_text(text)
    newer = BaselineEntry(value=4400.0, spread=50.0, direction="higher", tolerance=0.5, n=1)
    update_baseline(path, "test_a", {"output_throughput_tok_s": newer}, {"commit": "def"})
    update_baseline(path, "test_b", {"ttft_s.p50": TTFT}, {})
    after = Path(path).read_text()
    assert after.startswith("# Measured on the nightly runner, not a laptop.\n")
    assert "tolerance = 0.5  # widened: TTFT of 16 requests swings\n" in after
    assert load_baseline(path, "test_a").metrics == {"output_throughput_tok_s": newer}
    assert load_baseline(path, "test_a").provenance == {"commit": "def"}
    assert load_baseline(path, "test_b").metrics == {"ttft_s.p50": TTFT}


def test_floats_are_rounded_and_provenance_made_toml_safe(path):
    entry = BaselineEntry(value=0.21000000000000002, spread=0.0041234567, direction="lower",
                          tolerance=0.1, n=3)  # fmt: skip
    provenance = {"engine": {"tp": (1, 2), "path": Path("/m"), "dtype": None}}
    update_baseline(path, "t", {"ttft_s.p50": entry}, provenance)
    baseline = load_baseline(path, "t")
    assert baseline.metrics["ttft_s.p50"].value == 0.21
    assert baseline.metrics["ttft_s.p50"].spread == 0.00412346
    assert baseline.provenance == {"engine": {"path": "/m", "tp": [1, 2]}}


ENTRY = '["test_fixed[64]".metrics."ttft_s.p50"]\n'
GOOD = 'value = 0.21\nspread = 0.0\nn = 1\ndirection = "lower"\ntolerance = 0.1\n'
KEY = 'baselines/cpu/test_cpu.toml: ["test_fixed[64]"]'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('["test_fixed[64]"]\nmetrics = 3\n',
         f"{KEY}.metrics: expected a table, got 3; {FIX}"),
        ('"test_fixed[64]" = 1\n', f"{KEY}: expected a table, got 1; {FIX}"),
        ('["test_fixed[64]".provenance]\ncommit = "x"\n', f'{KEY}: missing "metrics"; {FIX}'),
        ('["test_fixed[64]".metric]\n',
         f'{KEY}: unknown key "metric" (keys: metrics, provenance); {FIX}'),
        ('["test_fixed[64]".metrics]\n"ttft_s.p50" = 0.21\n',
         f'{KEY}.metrics."ttft_s.p50": expected a table of value, spread, n, direction, '
         f"tolerance, got 0.21; {FIX}"),
        (ENTRY + GOOD.replace("value = 0.21\n", ""),
         f'{KEY}.metrics."ttft_s.p50": missing "value"; {FIX}'),
        (ENTRY + "value = 0.21\n",
         f'{KEY}.metrics."ttft_s.p50": missing "spread", "n", "direction", "tolerance"; {FIX}'),
        (ENTRY + GOOD + "tolerence = 0.2\n",
         f'{KEY}.metrics."ttft_s.p50": unknown field "tolerence" (fields: value, spread, n, '
         f"direction, tolerance); {FIX}"),
        (ENTRY + GOOD.replace("0.21", '"0.21"'),
         f'{KEY}.metrics."ttft_s.p50": "value" must be a number, got str \'0.21\'; {FIX}'),
        (ENTRY + GOOD.replace("0.21", "true"),
         f'{KEY}.metrics."ttft_s.p50": "value" must be a number, got bool True; {FIX}'),
        (ENTRY + GOOD.replace("0.21", "nan"),
         f'{KEY}.metrics."ttft_s.p50": "value" must be finite, got nan; {FIX}'),
        (ENTRY + GOOD.replace("spread = 0.0", "spread = -1.0"),
         f'{KEY}.metrics."ttft_s.p50": "spread" must be finite and >= 0, got -1.0; {FIX}'),
        (ENTRY + GOOD.replace('"lower"', '"down"'),
         f'{KEY}.metrics."ttft_s.p50": "direction" must be "lower" or "higher", got \'down\'; '
         f"{FIX}"),
        (ENTRY + GOOD.replace("n = 1", "n = 0"),
         f'{KEY}.metrics."ttft_s.p50": "n" must be an integer >= 1, got 0; {FIX}'),
        (ENTRY + GOOD.replace("n = 1", "n = 1.5"),
         f'{KEY}.metrics."ttft_s.p50": "n" must be an integer >= 1, got 1.5; {FIX}'),
        (ENTRY + GOOD.replace("tolerance = 0.1", "tolerance = 10"),
         f'{KEY}.metrics."ttft_s.p50": "tolerance" is a fraction (0.1 means 10%) from 0 to 4, got 10.0; '
         f"{FIX}"),
    ],
)  # fmt: skip
def test_malformed_entries_name_file_key_and_fix(path, text, message):
    write(path, text)
    with pytest.raises(BaselineError) as info:
        load_baseline(path, "test_fixed[64]")
    assert str(info.value) == message
    assert "\n" not in str(info.value)


def test_a_malformed_entry_fails_only_its_own_test(path):
    write(path, ENTRY + GOOD.replace('"lower"', '"down"') + '\n["other".metrics.x]\n' + GOOD)
    assert load_baseline(path, "other").metrics["x"].value == 0.21


def test_invalid_toml(path):
    write(path, '["test_fixed[64]".metrics\nvalue = 1\n')
    with pytest.raises(BaselineError) as info:
        load_baseline(path, "test_fixed[64]")
    assert str(info.value) == (
        "baselines/cpu/test_cpu.toml: not valid TOML (Expected ']' at the end of a table "
        "declaration (at line 1, column 26)); fix the file, or delete it and regenerate it with "
        "--llmperf-update-baselines"
    )


def test_update_refuses_to_overwrite_invalid_toml(path):
    write(path, "this is = = not toml\n")
    with pytest.raises(BaselineError, match="not valid TOML .*; fix the file, or delete it to"):
        update_baseline(path, "t", {"ttft_s.p50": TTFT}, {})
    assert Path(path).read_text() == "this is = = not toml\n"


def test_update_refuses_entries_that_would_not_load(path):
    nan = BaselineEntry(value=math.nan, spread=0.0, direction="lower", tolerance=0.1, n=1)
    with pytest.raises(BaselineError) as info:
        update_baseline(path, "t", {"tpot_s.p50": nan}, {})
    assert str(info.value) == (
        'baselines/cpu/test_cpu.toml: ["t"].metrics."tpot_s.p50": refusing to write value nan; '
        "leave it out of the baseline"
    )
    sideways = BaselineEntry(value=1.0, spread=0.0, direction="sideways", tolerance=0.1, n=1)
    with pytest.raises(BaselineError, match="\"direction\" must be \"lower\" or \"higher\""):
        update_baseline(path, "t", {"tpot_s.p50": sideways}, {})
    assert not Path(path).exists()


# Engine mismatch


def baseline_with_engine(engine):
    return Baseline({}, {"engine": engine}, "baselines/cpu/test_cpu.toml", "test_fixed[64]")


def test_engine_match_ignores_none_and_tuple_vs_list():
    stored = baseline_with_engine({"model": "m", "max_num_seqs": 256, "tp": [1, 2]})
    assert engine_mismatch(stored, {"model": "m", "max_num_seqs": 256, "tp": (1, 2),
                                    "dtype": None}) is None  # fmt: skip


def test_engine_mismatch_names_file_key_and_fields():
    stored = baseline_with_engine({"model": "m", "max_num_seqs": 256, "enforce_eager": True})
    message = engine_mismatch(stored, {"model": "m", "max_num_seqs": 1024, "dtype": "bfloat16"})
    assert message == (
        'baselines/cpu/test_cpu.toml: ["test_fixed[64]"]: baseline was measured with another '
        'engine configuration (dtype (absent) -> "bfloat16", enforce_eager true -> (absent), '
        "max_num_seqs 256 -> 1024); if the change is intended, regenerate it with "
        "--llmperf-update-baselines"
    )


def test_engine_mismatch_without_a_recorded_engine_is_unknown():
    assert engine_mismatch(Baseline({}, {}, "f.toml", "t"), {"model": "m"}) is None


# Atomicity and concurrency


def test_no_temp_files_left_and_a_failed_write_keeps_the_old_file(path, monkeypatch):
    update_baseline(path, "a", {"ttft_s.p50": TTFT}, {})
    before = Path(path).read_text()
    assert sorted(p.name for p in Path(path).parent.iterdir()) == [
        "test_cpu.toml", "test_cpu.toml.lock"
    ]  # fmt: skip

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(baselines.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        update_baseline(path, "b", {"ttft_s.p50": TTFT}, {})
    assert Path(path).read_text() == before
    assert sorted(p.name for p in Path(path).parent.iterdir()) == [
        "test_cpu.toml", "test_cpu.toml.lock"
    ]  # fmt: skip


WRITERS = 8
UPDATES_EACH = 10


def _writer(path: str, test_id: str, start: multiprocessing.synchronize.Barrier) -> None:
    start.wait()  # all writers race from the same instant
    for i in range(UPDATES_EACH):
        entry = BaselineEntry(value=float(i + 1), spread=0.0, direction="lower", tolerance=0.1,
                              n=1)  # fmt: skip
        update_baseline(path, test_id, {"ttft_s.p50": entry}, {"writer": test_id})


def test_concurrent_writers_lose_no_table(path):
    # Like pytest-xdist workers: separate processes updating different tests of one file.
    context = multiprocessing.get_context("fork")
    start = context.Barrier(WRITERS)
    ids = [f"test_fixed[{i}]" for i in range(WRITERS)]
    workers = [context.Process(target=_writer, args=(path, i, start)) for i in ids]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0] * WRITERS
    document = tomllib.loads(Path(path).read_text())  # valid TOML
    assert sorted(document) == sorted(ids)
    for test_id in ids:
        assert load_baseline(path, test_id).metrics["ttft_s.p50"].value == UPDATES_EACH
    assert not [p for p in Path(path).parent.iterdir() if p.name.endswith(".tmp")]


# Saved runs


def test_run_round_trip_keeps_nan_and_leaves_no_temp_file(tmp_path):
    run = {"test_fixed[64]": {"ttft_s.p50": 0.21, "tpot_s.p50": math.nan}, "meta": {"n": 1}}
    target = tmp_path / ".llmperf" / "runs" / "before.json"
    write_run(target, run)
    loaded = load_run(target)
    assert loaded["test_fixed[64]"]["ttft_s.p50"] == 0.21
    assert math.isnan(loaded["test_fixed[64]"]["tpot_s.p50"])
    assert [p.name for p in target.parent.iterdir()] == ["before.json"]
    assert list(json.loads(target.read_text().replace("NaN", "null"))) == ["meta", "test_fixed[64]"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "runs/before.json: no saved run here; save one first with --llmperf-save NAME"),
        ("{not json", "runs/before.json: not valid JSON (Expecting property name enclosed in "
         "double quotes: line 1 column 2 (char 1)); save the run again with --llmperf-save NAME"),
        ("[1, 2]", "runs/before.json: expected a JSON object, got list; save the run again with "
         "--llmperf-save NAME"),
    ],
)  # fmt: skip
def test_malformed_runs(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    if text is not None:
        write("runs/before.json", text)
    with pytest.raises(RunFileError) as info:
        load_run("runs/before.json")
    assert str(info.value) == message


def test_a_baseline_recorded_with_a_real_secret_matches_and_never_prints_it():
    stored = Baseline({}, {"engine": {"model": "m", "env": {"HF_TOKEN": "hf_old_secret"}}},
                      "f.toml", "t")
    assert engine_mismatch(stored, {"model": "m", "env": {"HF_TOKEN": "<redacted>"}}) is None
    changed = engine_mismatch(stored, {"model": "m2", "env": {"HF_TOKEN": "<redacted>"}})
    assert "hf_old_secret" not in changed and 'model "m" -> "m2"' in changed
