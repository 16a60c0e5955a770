"""A model named by its Hugging Face Hub id: its config and tokenizer come from huggingface_hub's
cache (pytest_llmperf/model_files.py), offline here (tests/hub_cache.py builds the cache)."""

from __future__ import annotations

import http.server
import json
import threading
from types import SimpleNamespace

import pytest

from pytest_llmperf import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.metrics.roofline import NoRoofline, model_config
from pytest_llmperf.model_files import cached_file, is_hub_id, model_dir
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.runner import Runner, RunnerConfig
from pytest_llmperf.session.target import OurEngines
from pytest_llmperf.workloads.prompts import HFTokenizer, load_tokenizer
from pytest_llmperf.workloads.vocab import VocabOnly, vocab_from_config
from tests.hub_cache import (
    MAIN_COMMIT,
    REPO_ID,
    TINY_LLAMA,
    add_snapshot,
    closed_port,
    files_of,
    tiny_llama_hub,
    use_offline_cache,
)
from tests.unit.fingerprints import CPU

V1_COMMIT = "0123456789abcdef0123456789abcdef01234567"
FETCH = "hf download acme/tiny-llama --include '*.json'"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """acme/tiny-llama in an offline cache: `main` the tiny model, tag `v1` (V1_COMMIT) the same
    architecture with another vocabulary and no tokenizer files."""
    cache = tiny_llama_hub(tmp_path / "hf-home", monkeypatch)
    config = json.loads((TINY_LLAMA / "config.json").read_text())
    add_snapshot(cache, REPO_ID, {"config.json": json.dumps({**config, "vocab_size": 1000})
                                  .encode()}, V1_COMMIT, refs=("v1",))
    return cache


def runner() -> Runner:
    """The session's runner (what loads a test's tokenizer), with no engine pool."""
    return Runner(RunnerConfig(), OurEngines(SimpleNamespace()), Ledger(CPU))


def test_the_tokenizer_and_vocabulary_of_a_hub_id_load_from_the_cache(hub):
    directory = model_dir(REPO_ID)
    assert directory == hub / "models--acme--tiny-llama" / "snapshots" / MAIN_COMMIT
    tokenizer = load_tokenizer(directory)
    assert tokenizer.vocab_size == load_tokenizer(TINY_LLAMA).vocab_size
    assert vocab_from_config(directory).vocab_size == 4096
    # What the plugin does before an engine starts: the same tokenizer the local copy gives.
    found = runner().tokenizer_for(Engine(model=REPO_ID, load_format="dummy"))
    assert isinstance(found, HFTokenizer)
    assert found.encode("hello world") == load_tokenizer(TINY_LLAMA).encode("hello world")


@pytest.mark.parametrize("revision", ["v1", V1_COMMIT])
def test_revision_picks_its_snapshot(hub, revision):
    directory = model_dir(REPO_ID, revision)
    assert directory == hub / "models--acme--tiny-llama" / "snapshots" / V1_COMMIT
    found = runner().tokenizer_for(Engine(model=REPO_ID, revision=revision))
    assert isinstance(found, VocabOnly) and found.vocab_size == 1000  # v1's config.json
    assert model_config(REPO_ID, revision=revision)["vocab_size"] == 1000  # the roofline's


def test_one_cached_file_by_the_same_lookup_and_none_for_what_is_not_there(hub, monkeypatch):
    snapshots = hub / "models--acme--tiny-llama" / "snapshots"
    assert cached_file(REPO_ID, "config.json") == snapshots / MAIN_COMMIT / "config.json"
    assert cached_file(REPO_ID, "config.json", revision="v1") == snapshots / V1_COMMIT / "config.json"
    assert cached_file(REPO_ID, "tokenizer.json", revision="v1") is None  # v1 has none
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    assert cached_file("acme/other", "config.json") is None  # no request, even online
    assert cached_file(REPO_ID, "config.json", repo_type="dataset") is None


def test_the_roofline_reads_a_cached_hub_config_and_never_downloads(hub, monkeypatch):
    assert model_config(REPO_ID)["vocab_size"] == 4096
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    with pytest.raises(NoRoofline, match="no config.json for acme/other on this machine"):
        model_config("acme/other")  # local_files_only: no request, even with the Hub allowed


def test_a_missing_hub_id_fails_with_one_line_naming_cache_and_command(hub):
    with pytest.raises(InputError) as info:
        runner().tokenizer_for(Engine(model="acme/no-such-model"))
    assert str(info.value) == (
        f"acme/no-such-model: not in the Hugging Face cache {hub} (HF_HUB_OFFLINE is set); fetch "
        "its config and tokenizer with: hf download acme/no-such-model --include '*.json'")


def test_a_missing_revision_names_it_in_the_line_and_the_command(hub):
    with pytest.raises(InputError) as info:
        model_dir(REPO_ID, "v2")
    assert str(info.value) == (
        f"acme/tiny-llama (revision v2): not in the Hugging Face cache {hub} (HF_HUB_OFFLINE is "
        "set); fetch its config and tokenizer with: hf download acme/tiny-llama --revision v2 "
        "--include '*.json'")


def test_an_unreachable_hub_is_one_line_too(tmp_path, monkeypatch):
    """Downloads allowed, an empty cache, and a Hub that refuses the connection (a closed port
    on this machine: a real connection error, with no network needed)."""
    cache = use_offline_cache(tmp_path / "hf-home", monkeypatch)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(InputError) as info:
        model_dir(REPO_ID)
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"acme/tiny-llama: not in the Hugging Face cache {cache}, and the "
                           "Hugging Face Hub could not be reached (ConnectError: ")
    assert line.endswith(f"); fetch its config and tokenizer once it can be: {FETCH}, or set "
                         "HF_HUB_OFFLINE=1 to use the cache alone")


def test_a_local_directory_stays_a_local_directory(hub):
    assert model_dir(str(TINY_LLAMA)) == TINY_LLAMA
    assert model_dir("suites/models/tiny-llama").resolve() == TINY_LLAMA  # relative to the cwd
    assert not is_hub_id("./acme/tiny-llama")  # written as a path: never looked up
    assert not is_hub_id("a/b/c")  # no Hub id has three parts: a path that does not exist
    assert is_hub_id(REPO_ID) and is_hub_id("gpt2")


def test_a_partly_cached_snapshot_is_used_for_the_files_it_has(hub):
    """A cache vLLM filled may lack a small file we ask for (generation_config.json here):
    prompt generation needs only tokenizer.json or config.json."""
    files = files_of(TINY_LLAMA)
    del files["generation_config.json"]
    commit = "fedcba9876543210fedcba9876543210fedcba98"
    add_snapshot(hub, "acme/partial", files, commit)
    assert model_dir("acme/partial").name == commit
    assert isinstance(runner().tokenizer_for(Engine(model="acme/partial")), HFTokenizer)


def test_revision_is_vllms_flag():
    engine = Engine(model=REPO_ID, revision="v1", load_format="dummy")
    assert engine.server_args()[:4] == ["--model", REPO_ID, "--revision", "v1"]
    assert engine.label() == "tiny-llama rev=v1 load=dummy"
    assert Engine(model=REPO_ID).to_dict() == {"model": REPO_ID}  # unset: no flag, same digest
    with pytest.raises(InputError, match=r"^Engine\(revision=''\): expected a non-empty string"):
        Engine(model=REPO_ID, revision="")


class FakeHub(http.server.BaseHTTPRequestHandler):
    """A Hub that answers every request with one error, as huggingface.co marks its errors (the
    X-Error-Code header huggingface_hub's hf_raise_for_status reads)."""

    status, code = 404, "RepoNotFound"

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("X-Error-Code", self.code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """Downloads allowed, an empty cache, no token, and the Hub at a local FakeHub."""
    use_offline_cache(tmp_path / "hf-home", monkeypatch)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT",
                        f"http://127.0.0.1:{server.server_address[1]}")
    yield FakeHub
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status, code, token, line", [
    (403, "GatedRepo", None,
     "meta-llama/Llama-3.1-8B-Instruct: a gated model on the Hugging Face Hub and HF_TOKEN is not "
     "set; accept its terms at https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct and set "
     "HF_TOKEN to a token of that account"),
    (403, "GatedRepo", "hf_NotARealToken123",
     "meta-llama/Llama-3.1-8B-Instruct: a gated model on the Hugging Face Hub and the token set "
     "has no access to it; accept its terms at "
     "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct and set HF_TOKEN to a token of "
     "that account"),
    (404, "RepoNotFound", None,
     "meta-llama/Llama-3.1-8B-Instruct: no such local directory, and no such model on the "
     "Hugging Face Hub (or a private one, and HF_TOKEN is not set)"),
], ids=["gated", "gated-with-token", "not-found"])
def test_what_the_hub_refuses_is_one_line(fake_hub, monkeypatch, status, code, token, line):
    fake_hub.status, fake_hub.code = status, code
    if token:
        monkeypatch.setenv("HF_TOKEN", token)
    with pytest.raises(InputError) as info:
        runner().tokenizer_for(Engine(model="meta-llama/Llama-3.1-8B-Instruct"))
    assert str(info.value) == line  # and never the token itself


def test_a_revision_the_hub_does_not_have_is_one_line(fake_hub):
    fake_hub.status, fake_hub.code = 404, "RevisionNotFound"
    with pytest.raises(InputError) as info:
        model_dir(REPO_ID, "v9")
    assert str(info.value) == ("acme/tiny-llama: the Hugging Face Hub has no revision 'v9' of it "
                               "(a branch, tag or commit hash)")
