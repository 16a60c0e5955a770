"""Weights before the clock starts (engines/weights.py, model_files.fetch_weights): a real-weight
Hub model's weights are put into huggingface_hub's cache before its engine's start, with the
files vLLM would read; offline, one line and nothing fetched. The cache is built in tmp_path
(tests/hub_cache.py); the Hub is a closed port on this machine, or a FileHub serving one
repository from this machine: no network."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import threading
from urllib.parse import unquote, urlparse

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.engines.pool import engine_factory
from pytest_llmperf.engines.weights import fetch_before_start
from pytest_llmperf.errors import InputError
from pytest_llmperf.model_files import fetch_weights, weight_patterns
from tests.hub_cache import (
    REPO_ID,
    TINY_LLAMA,
    add_snapshot,
    closed_port,
    files_of,
    use_offline_cache,
)

COMMIT = "abcdefabcdefabcdefabcdefabcdefabcdefabcd"
WEIGHTS = b"\0" * 4096  # what the files hold does not matter here, only their names


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache under tmp_path, downloads allowed, the Hub out of reach (a
    closed port: a real connection error, at once)."""
    hub = use_offline_cache(tmp_path / "hf-home", monkeypatch)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", endpoint)
    monkeypatch.setattr("huggingface_hub.constants.HUGGINGFACE_CO_URL_TEMPLATE",
                        endpoint + "/{repo_id}/resolve/{revision}/{filename}")
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


class FileHub(http.server.BaseHTTPRequestHandler):
    """A Hub serving one repository at one commit, as huggingface_hub's snapshot_download asks
    for it: the revision's commit, the file tree, then each file (HEAD for its commit and ETag,
    GET for its bytes). `requests` keeps what was asked."""

    files: dict[str, bytes] = {}
    requests: list[tuple[str, str]] = []

    def do_GET(self) -> None:
        path = unquote(urlparse(self.path).path)
        self.requests.append((self.command, path))
        if re.match(r"^/api/models/acme/llama/revision/", path):
            return self._send(json.dumps({"id": "acme/llama", "sha": COMMIT}).encode())
        if re.match(r"^/api/models/acme/llama/tree/", path):
            return self._send(json.dumps([
                {"type": "file", "path": name, "size": len(data),
                 "oid": hashlib.sha1(data).hexdigest()}
                for name, data in self.files.items()]).encode())
        file = re.match(rf"^/acme/llama/resolve/{COMMIT}/(.+)$", path)
        if file and file.group(1) in self.files:
            data = self.files[file.group(1)]
            return self._send(data, ("X-Repo-Commit", COMMIT),
                              ("ETag", f'"{hashlib.sha1(data).hexdigest()}"'))
        self._send(b"", ("X-Error-Code", "EntryNotFound"), status=404)

    do_HEAD = do_GET

    def _send(self, body: bytes, *headers: tuple[str, str], status: int = 200) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def file_hub(tmp_path, monkeypatch):
    """An empty cache, downloads allowed, and the Hub a FileHub on this machine holding acme/llama
    with every kind of file a Llama repository has."""
    hub = use_offline_cache(tmp_path / "hf-home", monkeypatch)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    FileHub.files = {"config.json": b'{"a": 1}', "tokenizer.json": b'{"b": 2}',
                     "model-00001-of-00002.safetensors": b"\1" * 1000,
                     "model-00002-of-00002.safetensors": b"\2" * 1000,
                     "model.safetensors.index.json": b'{"weight_map": {}}',
                     "pytorch_model.bin": b"\3" * 1000, "original/consolidated.00.pth": b"\4" * 1000}
    FileHub.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FileHub)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    # huggingface_hub builds the file URLs' template from HF_ENDPOINT at import: both move here.
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", endpoint)
    monkeypatch.setattr("huggingface_hub.constants.HUGGINGFACE_CO_URL_TEMPLATE",
                        endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    yield hub
    server.shutdown()
    server.server_close()


def test_fetched_from_the_hub_are_the_safetensors_and_what_vllm_reads_beside(file_hub):
    [begin, end] = said([Engine(model="acme/llama")], set())
    snapshot = file_hub / "models--acme--llama" / "snapshots" / COMMIT
    assert end == (f"weights of acme/llama: 2 file(s), 0.0 GB, in {snapshot} (0 s)")
    assert sorted(p.name for p in snapshot.iterdir()) == [
        "config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
        "model.safetensors.index.json", "tokenizer.json"]
    got = sorted(path.rsplit("/", 1)[1] for method, path in FileHub.requests
                 if method == "GET" and "/resolve/" in path)
    assert got == ["config.json", "model-00001-of-00002.safetensors",
                   "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                   "tokenizer.json"]  # never the .bin, nor Meta's original/ checkpoint
    FileHub.requests.clear()
    assert len(fetch_weights("acme/llama")) == 2  # a second time: from the cache
    assert not [r for r in FileHub.requests if r[0] == "GET" and "/resolve/" in r[1]]


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
               Engine(model=REPO_ID, load_format="dummy"), Engine(model=str(TINY_LLAMA)),
               # a cache of their own: a fetch into this one would not spare them the download
               Engine(model="acme/other", env={"HF_HOME": "/elsewhere"}),
               Engine(model="acme/other", extra_args={"download-dir": "/elsewhere"})]
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
