"""engines/arg_check.py, the parent side of --llmperf-check-args: what it sends its child, what it
makes of the answers, and its one-line errors when the child fails. The children here are
stand-in interpreters (`Engine(python=...)`) that speak the worker's protocol, so no vLLM is
needed; tests/plugin/test_check_args_plugin.py checks against vLLM's real parser."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines import arg_check
from pytest_llmperf.engines.arg_check import ArgCheckError, check_engines

# Answers as the worker does: its version once, then per argument list a refusal or null; it
# also records what it was sent.
FAKE_WORKER = """
import json, sys
print(json.dumps({"vllm": "9.9.9"}), flush=True)
for line in sys.stdin:
    args = json.loads(line)
    with open(sys.argv[-1], "a") as seen:
        seen.write(line)
    bad = [arg for arg in args if arg == "--max-num-seqz"]
    refusal = f"unrecognized arguments: {bad[0]}" if bad else None
    print(json.dumps({"refusal": refusal}), flush=True)
"""


@pytest.fixture(autouse=True)
def no_children_left():
    yield
    arg_check.close_all()


def interpreter(tmp_path: Path, body: str) -> str:
    """An executable that stands in for a Python with vLLM: `python -m <worker>` runs `body`."""
    script = tmp_path / "worker.py"
    script.write_text(body)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "{tmp_path / "seen"}"\n')
    python.chmod(0o755)
    return str(python)


def test_accepted_engines_are_listed_with_the_parsers_version(tmp_path):
    a = Engine(model="/models/m", load_format="dummy", python=interpreter(tmp_path, FAKE_WORKER))
    b = a.replace(max_num_seqs=2)
    outcome = check_engines([("A/B side A", a), ("A/B side B", b)])
    assert outcome.failure is None
    assert outcome.summary == ("engine arguments checked: A/B side A (m load=dummy); A/B side B "
                               "(m load=dummy seqs=2) (vLLM 9.9.9's vllm serve parser)")
    seen = [json.loads(line) for line in (tmp_path / "seen").read_text().splitlines()]
    assert seen == [a.server_args(), b.server_args()]  # one child for both: one interpreter


def test_the_first_refusal_is_the_failure(tmp_path):
    good = Engine(model="/models/m", python=interpreter(tmp_path, FAKE_WORKER))
    typo = good.replace(extra_args={"max-num-seqz": 8})
    outcome = check_engines([("engine", typo), ("engine", good)])
    assert outcome.failure == ("engine (m extra_args=max-num-seqz:8): vLLM 9.9.9 refuses its "
                               "arguments: unrecognized arguments: --max-num-seqz")


def test_a_child_that_ends_before_answering_is_one_line_with_its_last_words(tmp_path):
    python = interpreter(tmp_path, "import sys\nprint('Traceback (most recent call last):', "
                                   "file=sys.stderr)\nprint(\"ModuleNotFoundError: No module "
                                   "named 'vllm'\", file=sys.stderr)\nsys.exit(1)\n")
    with pytest.raises(ArgCheckError) as caught:
        check_engines([("engine", Engine(model="/models/m", python=python))])
    assert str(caught.value) == (
        f"the vLLM argument check ({python} -m pytest_llmperf.engines.arg_check_worker) ended "
        "before answering: ModuleNotFoundError: No module named 'vllm'")


def test_an_interpreter_that_is_not_there_is_one_line(tmp_path):
    python = str(tmp_path / "no-such-python")
    with pytest.raises(ArgCheckError) as caught:
        check_engines([("engine", Engine(model="/models/m", python=python))])
    assert str(caught.value) == (
        f"the vLLM argument check ({python} -m pytest_llmperf.engines.arg_check_worker) could not "
        "start: No such file or directory")


def test_a_child_that_dies_later_is_replaced_on_the_next_check(tmp_path):
    once = FAKE_WORKER.replace("print(json.dumps({\"refusal\": refusal}), flush=True)",
                               "sys.exit(1)")
    engine = Engine(model="/models/m", python=interpreter(tmp_path, once))
    for _ in range(2):  # the second check starts a fresh child, which says hello again
        with pytest.raises(ArgCheckError, match="ended before answering: no output$"):
            check_engines([("engine", engine)])
    assert arg_check._CHECKERS == {}


def test_a_pydantic_refusal_names_the_field_and_what_it_takes():
    """vLLM validates a JSON config flag with pydantic, whose first line only counts errors."""
    from typing import Literal

    import pydantic

    from pytest_llmperf.engines.kinds.parsing import first_line

    class StructuredOutputsConfig(pydantic.BaseModel):
        backend: Literal["auto", "xgrammar"] = "auto"

    with pytest.raises(pydantic.ValidationError) as info:
        StructuredOutputsConfig(backend="xgrammer")
    assert first_line(info.value) == (
        "1 validation error for StructuredOutputsConfig: backend: Input should be 'auto' or "
        "'xgrammar'")
