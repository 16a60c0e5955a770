"""Trace replay (workloads/traces.py, Workload.trace): the three formats, their prefix reuse, the
schedule, and the one line a bad row gets. The trace files are written here, small, in each
publisher's format (no download)."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf import Workload
from pytest_llmperf.client.patterns import Trace
from pytest_llmperf.workloads.datasets import DatasetError
from pytest_llmperf.workloads.traces import read_trace, select

MOONCAKE = [  # timestamp in ms; hash ids name 512-token blocks; 0 and 1 are shared
    {"timestamp": 0, "input_length": 700, "output_length": 8, "hash_ids": [0, 1]},
    {"timestamp": 250, "input_length": 1000, "output_length": 4, "hash_ids": [0, 1]},
    {"timestamp": 250, "input_length": 600, "output_length": 4, "hash_ids": [0, 2]},
    {"timestamp": 1500, "input_length": 300, "output_length": 2, "hash_ids": [3]},
]
AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.2,879,20
"""
BURSTGPT = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,231,1318,Conversation log
118,GPT-4,417,276,693,API log
"""


class Vocab:
    vocab_size = 1000
    special_ids = frozenset({0, 1, 2})

    def encode(self, text):
        raise AssertionError("token-id prompts need no encode")

    def decode(self, ids):
        raise AssertionError("token-id prompts need no decode")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def mooncake(tmp_path):
    return write(tmp_path, "trace.jsonl", "".join(json.dumps(r) + "\n" for r in MOONCAKE))


def test_mooncake_rows_and_offsets(mooncake):
    rows = read_trace(mooncake, "mooncake")
    assert [r.offset_s for r in rows] == [0.0, 0.25, 0.25, 1.5]
    assert [(r.input_tokens, r.output_tokens, r.hash_ids) for r in rows][1] == (1000, 4, (0, 1))


def test_azure_datetimes_become_offsets(tmp_path):
    rows = read_trace(write(tmp_path, "azure.csv", AZURE), "azure")
    assert [round(r.offset_s, 6) for r in rows] == [0.0, 4.314579, 4.51941]
    assert [(r.input_tokens, r.output_tokens) for r in rows] == [(374, 44), (396, 109), (879, 20)]


def test_burstgpt_seconds_from_the_first_row(tmp_path):
    rows = read_trace(write(tmp_path, "burst.csv", BURSTGPT), "burstgpt")
    assert [r.offset_s for r in rows] == [0.0, 40.0, 113.0]
    assert [(r.input_tokens, r.output_tokens) for r in rows][2] == (417, 276)


def test_equal_hash_ids_give_equal_blocks(mooncake):
    workload = Workload.trace(mooncake, format="mooncake", seed=3)
    requests, warmup = workload.build(Vocab())
    assert warmup == []
    a, b, c, d = (r.prompt for r in requests)
    assert [len(p) for p in (a, b, c, d)] == [700, 1000, 600, 300]
    assert a == b[:700]  # hash ids 0, 1: the same 1024 tokens, cut to each input length
    assert a[:512] == c[:512] and a[512:600] != c[512:600]  # block 0 shared, 1 and 2 differ
    assert d[:300] != a[:300]
    assert all(t not in Vocab.special_ids for p in (a, b, c, d) for t in p)
    again, _ = Workload.trace(mooncake, format="mooncake", seed=3).build(Vocab())
    assert [r.prompt for r in again] == [a, b, c, d]
    other, _ = Workload.trace(mooncake, format="mooncake", seed=4).build(Vocab())
    assert other[0].prompt != a


def test_speedup_window_and_schedule(mooncake):
    workload = Workload.trace(mooncake, format="mooncake", speedup=2.0, start_s=0.1)
    assert workload.pattern == Trace(offsets_s=(0.0, 0.0, 0.625))
    assert workload.num_requests == 3
    assert workload.to_dict()["pattern"] == {"type": "Trace", "requests": 3, "span_s": 0.625,
                                             "max_concurrency": None}
    assert workload.to_dict()["source"] == {"type": "TraceSource", "path": str(mooncake),
                                            "format": "mooncake", "rows": 3,
                                            "block_tokens": 512, "speedup": 2.0}
    assert workload.label() == "trace-x2 x3 @ trace 3 req over 0.625 s"
    short = Workload.trace(mooncake, format="mooncake", duration_s=1.0)
    assert short.num_requests == 3
    requests, _ = short.build(Vocab())
    assert [r.output_tokens for r in requests] == [8, 4, 4]


def test_warmup_requests_come_before_the_trace(mooncake):
    requests, warmup = Workload.trace(mooncake, format="mooncake",
                                      warmup_requests=2).build(Vocab())
    assert len(requests) == 4 and [len(r.prompt) for r in warmup] == [700, 700]
    assert warmup[0].prompt != requests[0].prompt


@pytest.mark.parametrize("fmt, text, message", [
    ("mooncake", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n'
                 '{"timestamp": 10, "output_length": 1}\n',
     "{path} line 2: 'input_length' is missing"),
    ("mooncake", '{"timestamp": 0, "input_length": -5, "output_length": 1}\n',
     "{path} line 1: 'input_length' is -5; a token count must be a whole number >= 1"),
    ("mooncake", '{"timestamp": 10, "input_length": 5, "output_length": 1}\n\n'
                 '{"timestamp": 9, "input_length": 5, "output_length": 1}\n',
     "{path} line 3: 'timestamp' goes backwards (a trace's rows must be in time order)"),
    ("mooncake", '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": "a"}\n',
     "{path} line 1: 'hash_ids' is 'a'; a list of ints"),
    ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,\n",
     "{path} line 2: 'GeneratedTokens' is missing"),
    ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,2\n"
              "2023-11-16 18:15:45,10,2\n",
     "{path} line 3: 'TIMESTAMP' goes backwards (a trace's rows must be in time order)"),
    ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,2\n",
     "{path} line 2: 'TIMESTAMP' is 'yesterday', not a datetime"),
    ("azure", "TIMESTAMP,Context,GeneratedTokens\n2023-11-16 18:15:46,10,2\n",
     "{path}: no 'ContextTokens' column; an Azure LLM inference trace has 'TIMESTAMP', 'ContextTokens' and "
     "'GeneratedTokens'"),
    ("burstgpt", "Timestamp,Model,Request tokens,Response tokens\n5,ChatGPT,10,0\n",
     "{path} line 2: 'Response tokens' is '0'; a token count must be a whole number >= 1; "
     "BurstGPT's failed requests have 0 response tokens: use its BurstGPT_without_fails_*.csv"),
    ("burstgpt", "Timestamp,Model,Request tokens,Response tokens\n-1,ChatGPT,10,3\n",
     "{path} line 2: 'Timestamp' is '-1'; seconds >= 0"),
])
def test_a_bad_row_is_one_line_naming_file_line_and_field(tmp_path, fmt, text, message):
    path = write(tmp_path, "bad.txt", text)
    with pytest.raises(DatasetError) as excinfo:
        Workload.trace(path, format=fmt)
    assert str(excinfo.value) == message.format(path=path)


def test_bad_arguments_say_why(mooncake, tmp_path):
    with pytest.raises(DatasetError, match=r"^trace format must be one of mooncake, azure, "
                                           r"burstgpt, got 'sharegpt'$"):
        Workload.trace(mooncake, format="sharegpt")
    with pytest.raises(DatasetError, match=r"^speedup must be a finite number > 0, got 0$"):
        Workload.trace(mooncake, format="mooncake", speedup=0)
    with pytest.raises(DatasetError, match=r"^no trace rows between 5 s and inf s \(the trace "
                                           r"spans 1.5 s\)$"):
        select(read_trace(mooncake, "mooncake"), start_s=5)
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(DatasetError, match=rf"^{missing}: no such trace file$"):
        Workload.trace(missing, format="mooncake")
