"""A suite whose measurements are injected, for the gate's plugin tests and those built on them:
CONFTEST replaces the session's `run` with records of the TTFT and TPOT that $FAKE_<workload>
names ("0.1,0.01" unless set); SUITE is three tests of one engine, one with an SLO."""

CONFTEST = '''
import os
import pytest
from pytest_llmperf.plugin import hooks as plugin
from pytest_llmperf.metrics.compute import compute_metrics
from pytest_llmperf.records import RequestRecord
from pytest_llmperf.metrics.result import Result

def fake_records(ttft, tpot, n=20, out=10):
    """n sequential requests, each ttft to its first token then one token every tpot."""
    records, t = [], 0.0
    for i in range(n):
        chunks = [t + ttft + k * tpot for k in range(out)]
        records.append(RequestRecord(index=i, expected_prompt_tokens=8,
                                     expected_output_tokens=out, scheduled_s=t, sent_s=t,
                                     chunk_times_s=chunks, chunk_tokens=[1] * out, done_s=chunks[-1],
                                     usage_prompt_tokens=8, usage_output_tokens=out))
        t = chunks[-1]
    return records

@pytest.fixture(autouse=True)
def _inject(request, monkeypatch):
    session = request.config.stash[plugin.SESSION_KEY]
    runner, ledger = session.runner, session.ledger
    def run(id, engine, workload, repeat, limits=None):
        ttft, tpot = (float(x) for x in os.environ.get("FAKE_" + workload.name, "0.1,0.01").split(","))
        runs = tuple(compute_metrics(fake_records(ttft, tpot), limits) for _ in range(repeat))
        result = Result(test_id=id.format(), key=id.key, engine=runner.engine_identity(engine),
                        engine_label=engine.label(), workload=workload.to_dict(),
                        workload_label=workload.label(), metrics=runs[0], runs=runs, records=())
        return ledger.add(id, result)
    monkeypatch.setattr(runner, "run", run)
'''

SUITE = '''
import pytest
from pytest_llmperf import Engine, Workload
from pytest_llmperf.verdict.gate import SLO

pytestmark = pytest.mark.engine(Engine(model="m", max_num_seqs=32))

def wl(name):
    return Workload.fixed(input_tokens=8, output_tokens=10, num_requests=20, concurrency=1,
                          name=name)

def test_a(llmperf):
    llmperf.run(wl("a"))

def test_b(llmperf):
    llmperf.run(wl("b"))

@pytest.mark.llmperf(slo=SLO(max={"ttft_s.p50": 0.15}))
def test_slo(llmperf):
    llmperf.run(wl("slo"))
'''
