"""Weights before the clock starts (engines/weights.py, model_files.fetch_weights): a real-weight
Hub model's weights are put into huggingface_hub's cache before its engine's start, with the
files vLLM would read; offline, one line and nothing fetched. The cache is built in tmp_path
(tests/hub_cache.py) and the Hub is a closed port on this machine: no network."""

from __future__ import annotations

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines.pool import engine_factory
from pytest_llmperf.engines.weights import fetch_before_start
from pytest_llmperf.errors import InputError
from pytest_llmperf.model_files import fetch_weights, weight_patterns
from tests.hub_cache import REPO_ID, TINY_LLAMA, add_snapshot, files_of, use_offline_cache
from tests.unit.test_model_files import closed_port

COMMIT = "abcdefabcdefabcdefabcdefabcdefabcdefabcd"
WEIGHTS = b"\0" * 4096  # what the files hold does not matter here, only their names


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache under tmp_path, downloads allowed, the Hub out of reach (a
    closed port: a real connection error, at once)."""
    hub = use_offline_cache(tmp_path / "hf-home", monkeypatch)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    return hub


def cached(hub, repo_id: str, *weights: str) -> None:
    """`repo_id` at `main` in the cache: the tiny model's config and tokenizer, and `weights`."""
    add_snapshot(hub, repo_id, {**files_of(TINY_LLAMA), **dict.fromkeys(weights, WEIGHTS)},
                 COMMIT)


def test_vllms_preference_per_load_format():
    assert weight_patterns(None) == weight_patterns("auto") == (
        "consolidated*.safetensors", "*.safetensors", "*.bin", "*.pt")
    assert weight_patterns("safetensors") == ("*.safetensors",)
    assert weight_patterns("pt") == ("*.pt",)
    assert weight_patterns("dummy") == weight_patterns("gguf") == ()


def test_cached_weights_are_found_in_the_snapshot(cache):
    cached(cache, "acme/llama", "model-00001-of-00002.safetensors",
           "model-00002-of-00002.safetensors", "pytorch_model.bin")
    files = fetch_weights("acme/llama")
    snapshot = cache / "models--acme--llama" / "snapshots" / COMMIT
    assert files == [snapshot / "model-00001-of-00002.safetensors",
                     snapshot / "model-00002-of-00002.safetensors"]  # not the .bin: vLLM's order
    with pytest.raises(InputError, match=r"^acme/llama: none of its weights \(\*\.pt\) are in"):
        fetch_weights("acme/llama", load_format="pt")


def test_the_first_format_the_repository_has_wins(cache):
    cached(cache, "acme/mistral", "consolidated.safetensors", "model.safetensors")
    cached(cache, "acme/old", "pytorch_model.bin")
    assert [f.name for f in fetch_weights("acme/mistral")] == ["consolidated.safetensors"]
    assert [f.name for f in fetch_weights("acme/mistral", load_format="hf")] == [
        "consolidated.safetensors", "model.safetensors"]
    assert [f.name for f in fetch_weights("acme/old")] == ["pytorch_model.bin"]


def test_what_is_fetched_is_what_vllm_reads(monkeypatch, tmp_path):
    """Each call asks huggingface_hub for one pattern (the next only when the repository has
    none of it), the small files with the first, and never Meta's original/ checkpoints."""
    calls = []

    def snapshot_download(repo_id, revision, allow_patterns, ignore_patterns):
        calls.append((repo_id, revision, allow_patterns, ignore_patterns))
        folder = tmp_path / "snapshot"
        folder.mkdir(exist_ok=True)
        if "*.bin" in allow_patterns:
            (folder / "pytorch_model.bin").write_bytes(WEIGHTS)
        return str(folder)

    monkeypatch.setattr("huggingface_hub.snapshot_download", snapshot_download)
    files = fetch_weights("acme/old", "v1")
    assert [f.name for f in files] == ["pytorch_model.bin"]
    beside = ["*.json", "*.model", "*.tiktoken", "*.txt", "*.jinja"]
    assert calls == [("acme/old", "v1", ["consolidated*.safetensors", *beside], ["original/**/*"]),
                     ("acme/old", "v1", ["*.safetensors"], ["original/**/*"]),
                     ("acme/old", "v1", ["*.bin"], ["original/**/*"])]


def test_no_weights_at_all_is_one_line(cache):
    cached(cache, "acme/bare")
    with pytest.raises(InputError) as info:
        fetch_weights("acme/bare")
    assert str(info.value) == (
        f"acme/bare: none of its weights (consolidated*.safetensors, *.safetensors, *.bin, *.pt) "
        f"are in the Hugging Face cache {cache}, and the Hugging Face Hub did not provide them "
        "(out of reach, or no such files): check the model id and its load_format")


def test_an_uncached_model_and_an_unreachable_hub_is_one_line(cache):
    with pytest.raises(InputError) as info:
        fetch_weights("acme/nowhere")
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"acme/nowhere: its weights are not in the Hugging Face cache {cache}, "
                           "and the Hugging Face Hub could not be reached (ConnectError: ")
    assert line.endswith("); fetch them once it can be: hf download acme/nowhere")


def said(engines, done) -> list[str]:
    lines = []
    fetch_before_start(engines, done, lines.append)
    return lines


def test_each_real_weight_hub_model_once_and_nothing_for_the_rest(cache):
    cached(cache, "acme/llama", "model.safetensors")
    done = set()
    engines = [Engine(model="acme/llama", max_num_seqs=8), Engine(model="acme/llama"),
               Engine(model=REPO_ID, load_format="dummy"), Engine(model=str(TINY_LLAMA))]
    begin, end = said(engines, done)
    assert begin == (f"weights of acme/llama: fetching into the Hugging Face cache {cache} "
                     "before its engine starts")
    assert end.startswith(f"weights of acme/llama: 1 file(s), 0.0 GB, in {cache}/models--acme--"
                          f"llama/snapshots/{COMMIT} (")
    assert said(engines, done) == []  # once a session
    [_, failed] = said([Engine(model="acme/nowhere")], done)
    assert failed.endswith("fetch them once it can be: hf download acme/nowhere (its engine will "
                           "not start)")


def test_offline_nothing_is_fetched_and_one_line_says_so(tmp_path, monkeypatch):
    hub = use_offline_cache(tmp_path / "hf-home", monkeypatch)
    monkeypatch.setattr("huggingface_hub.snapshot_download", pytest.fail)  # never called
    done = set()
    assert said([Engine(model="meta-llama/Llama-3.1-70B-Instruct")], done) == [
        "HF_HUB_OFFLINE is set: the weights of meta-llama/Llama-3.1-70B-Instruct are not fetched "
        f"before its engine starts; it reads them from the Hugging Face cache {hub}"]
    assert said([Engine(model="meta-llama/Llama-3.1-70B-Instruct")], done) == []


def test_the_pools_factory_fetches_before_it_makes_the_server(tmp_path, monkeypatch):
    """engine_factory says the line and makes the server (whose start, and its timeout, come
    later); nothing is said for the CPU suite's engines (dummy weights, a local directory)."""
    use_offline_cache(tmp_path / "hf-home", monkeypatch)
    said = []
    make = engine_factory(tmp_path / "logs", 900.0, say=said.append)
    server = make(Engine(model="acme/llama"), {})
    make(Engine(model=str(TINY_LLAMA), load_format="dummy"), {})
    assert [line.split(":")[0] for line in said] == ["HF_HUB_OFFLINE is set"]
    assert server.start_time_s is None  # made, not started
