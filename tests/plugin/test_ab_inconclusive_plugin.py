"""A paired A/B too noisy for its tolerance, as a user meets it: pytester runs a suite under
--llmperf-ab whose measurements are injected (test_confirm_later_plugin's conftest), with side
B's TPOT swinging from half to two and a half times A's, pair by pair. Neither a regression nor
a pass: the confirm pairs are measured to settle it, and when they do not, the verdict says
INCONCLUSIVE with the spread and what would settle it, and the test does not fail."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TINY_LLAMA
from tests.plugin.ab_suite import with_factors

FACTORS = '''B_FACTORS = {
    "test_noisy": [0.5, 2.0, 0.4, 2.5, 0.45, 2.2, 0.5, 1.9],
    "test_slower": [1.5] * 8,
}
'''

SUITE = '''
import pytest
from pytest_llmperf import Engine, Workload

ENGINE = Engine(model=%r, load_format="dummy", served_model_name="first")
WORKLOAD = Workload.fixed(input_tokens=8, output_tokens=3, num_requests=4, concurrency=2)

@pytest.mark.engine(ENGINE)
@pytest.mark.llmperf(gate=["tpot_s.p50"])
def test_noisy(llmperf):
    llmperf.run(WORKLOAD)

@pytest.mark.engine(ENGINE)
@pytest.mark.llmperf(gate=["tpot_s.p50"])
def test_slower(llmperf):
    llmperf.run(WORKLOAD)
''' % str(TINY_LLAMA)


@pytest.fixture
def suite(pytester: pytest.Pytester):
    pytester.makeconftest(with_factors(FACTORS))
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_pairs_too_noisy_to_decide_are_inconclusive_after_their_confirm_pairs(suite):
    result = suite.runpytest("-p", "no:cacheprovider", "--llmperf-ab",
                             json.dumps({"max_num_seqs": 8}), "--llmperf-json", "run.json")
    result.assert_outcomes(passed=1, failed=1)  # test_slower fails, test_noisy does not
    text = result.stdout.str()
    flat = " ".join(text.split())  # the summary's notes wrap at the terminal's width
    assert ("test_noisy: B was inconclusive over 4 ABBA pairs; 4 more measured after the "
            "other tests of its engine, to confirm") in flat
    assert ("test_slower: B regressed over 4 ABBA pairs; 4 more measured after the other tests "
            "of its engine, to confirm") in flat
    result.stdout.re_match_lines([
        r".*InconclusiveWarning: tpot_s\.p50 inconclusive on this machine in A/B: B/A median "
        r"1\.200 \(93% interval 0\.450-2\.200 over 8 ABBA pairs; the 4 confirm pairs alone "
        r"1\.200\), allowed <= 1\.100 \(lower is better; A/B tolerance 0\.1\): .* spread "
        r"\d+% \(robust sd\), so 8 pairs resolve only about \d+%, wider than the "
        r"tolerance 10%; about \d+ pairs, or a quieter machine, would settle it"])
    rows = {line.split()[0]: line for line in text.splitlines()
            if line.strip().startswith("test_noisy (B)") or line.strip().startswith(
                "test_slower (B)")}
    assert rows["test_noisy"].rstrip().endswith("INCONCLUSIVE")
    assert rows["test_slower"].rstrip().endswith("REGRESSION")
    run = json.loads((suite.path / "run.json").read_text())["llmperf"]["results"]
    noisy = next(r for r in run if r["test_id"].endswith("test_noisy (B)"))
    assert noisy["status"] == "inconclusive"
    assert noisy["ab"]["metrics"]["tpot_s.p50"]["status"] == "inconclusive"
