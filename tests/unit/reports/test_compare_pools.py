"""`llmperf compare-pools` (reports/pools.py, reports/commands/compare_pools.py): each pool's
run files read as one run of medians and spreads, the new pool judged against the old by
`llmperf compare`'s gate with both pools' measured spreads in the band: the same +30% change
is a regression between two quiet pools and passes, marked as noise-set, between noisy ones.
Bad input is one line (exit 2)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_llmperf import cli
from tests.unit.fingerprints import fingerprint_of
from tests.unit.reports.run_files import TEST, document, make_result, save_document

MACHINE = {"hardware_class": "cpu", "cpu_model": "Fake CPU 9000", "cpu_cores": 4,
           "vllm": "0.31.0", "python": "3.11.7"}

WEAKER = ("a pool comparison is weaker than a paired A/B: the pools differ in their nodes and "
          "nights as well as in the change, so it shows only a change larger than both pools' "
          "measured noise; where one node can run both sides, use --llmperf-ab or a "
          "before/after on that node (docs/upgrades.md)")


def pool(tmp_path, name: str, ttfts_ms: list[float], **fingerprint) -> list[str]:
    """One run file per node of a pool, node i's TTFT ttfts_ms[i] on every request."""
    paths = []
    for i, ttft in enumerate(ttfts_ms):
        machine = fingerprint_of({**MACHINE, **fingerprint})
        doc = document(make_result(TEST, (ttft / 1000,) * 4),
                       fingerprint=replace(machine, host=f"{name}-{i + 1}"))
        paths.append(save_document(tmp_path / f"{name}-{i + 1}.json", doc))
    return paths


def compare_pools(capsys, old: list[str], new: list[str], *more: str):
    code = cli.main(["compare-pools", "--old", *old, "--new", *new, "--metrics", "ttft_s.p50",
                     *more])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_two_quiet_pools_alike_pass_and_say_what_they_are(capsys, tmp_path):
    old = pool(tmp_path, "old", [195, 200, 205])
    new = pool(tmp_path, "new", [198, 201, 204])
    code, lines, err = compare_pools(capsys, old, new)
    assert code == 0 and err == ""
    assert lines[:3] == [
        WEAKER,
        f"A (old pool): 3 run(s) on 3 node(s) (old-1, old-2, old-3): {', '.join(old)}",
        f"B (new pool): 3 run(s) on 3 node(s) (new-1, new-2, new-3): {', '.join(new)}"]
    # Spreads 5 and 3 ms x 1.4826: band 3 x hypot(7.4, 4.4) = 25.9 ms = 13.0%.
    assert "test_fixed[64]  ttft_s.p50  200.0 ms  201.0 ms  +0.5%  +13.0%*  pass" in lines
    assert not any(line.startswith("changed from the old pool") for line in lines)
    assert lines[-1] == "0 regression(s), 0 improved, 1 pass; 0 test(s) in one file only"


def test_a_change_past_both_pools_noise_is_a_regression(capsys, tmp_path):
    code, lines, _ = compare_pools(capsys, pool(tmp_path, "old", [195, 200, 205]),
                                   pool(tmp_path, "new", [255, 260, 265]))
    assert code == 1
    assert "test_fixed[64]  ttft_s.p50  200.0 ms  260.0 ms  +30.0%  +15.7%*  REGRESSION" in lines
    assert lines[-1] == ("ttft_s.p50 regressed: 260.0 ms vs baseline 200.0 ms (+30.0%, allowed "
                         '+15.7% = 3 x noise, lower is better) [old pool :: "test_fixed[64]"]')


def test_the_same_change_between_noisy_pools_is_within_their_noise(capsys, tmp_path):
    # The old pool's nodes differ by 50 ms: spread 50 x 1.4826 = 74.1 ms; the new pool's by
    # 10 ms: 14.8 ms. Band 3 x hypot(74.1, 14.8) = 226.8 ms = 113.4% of 200 ms.
    code, lines, _ = compare_pools(capsys, pool(tmp_path, "old", [150, 200, 250]),
                                   pool(tmp_path, "new", [250, 260, 270]))
    assert code == 0
    assert "test_fixed[64]  ttft_s.p50  200.0 ms  260.0 ms  +30.0%  +113.4%*  pass" in lines
    assert ("* band widened by noise: 3 x the combined spread of the two pools' runs"
            in lines)


def test_a_pool_of_one_run_says_its_noise_is_not_measured(capsys, tmp_path):
    code, lines, _ = compare_pools(capsys, pool(tmp_path, "old", [200]),
                                   pool(tmp_path, "new", [200, 201, 199]))
    assert code == 0
    assert lines[3] == ("the old pool has fewer than 3 runs: its spread is hardly measured, "
                        "and with one run not at all (the tolerance alone judges it); give "
                        "each pool 3 runs or more")


def test_a_pool_of_two_hardware_families_is_refused_in_one_line(capsys, tmp_path):
    old = pool(tmp_path, "old", [200, 200])
    other = pool(tmp_path, "big", [200], cpu_cores=8)
    code, lines, err = compare_pools(capsys, [*old, *other], pool(tmp_path, "new", [200]))
    assert code == 2 and lines == []
    assert err.startswith("llmperf: error: the old pool's runs are of 2 hardware families (")
    assert err.endswith("a pool is one kind of node: compare each family's pools separately\n")
    assert err.count("\n") == 1


@pytest.mark.parametrize("missing", ["--old", "--new"])
def test_each_pool_is_required(capsys, tmp_path, missing):
    runs = pool(tmp_path, "p", [200])
    argv = ["compare-pools", "--old", *runs, "--new", *runs]
    at = argv.index(missing)
    assert cli.main(argv[:at] + argv[at + 2:]) == 2
    assert f"the following arguments are required: {missing}" in capsys.readouterr().err
