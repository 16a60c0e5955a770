"""inference-benchmarker profiles: the table, synthesized shapes, local datasets, the HF cache."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from pytest_llmperf.workloads.datasets import DatasetError
from pytest_llmperf.workloads.lengths import Fixed, Normal
from pytest_llmperf.workloads.profiles import (
    DATASET_REPO,
    PROFILES,
    find_cached_dataset,
    get_profile,
    profile_requests,
    resolve_dataset,
)
from pytest_llmperf.workloads.prompts import load_tokenizer
from tests.conftest import TINY_LLAMA
from tests.hub_cache import add_snapshot, use_offline_cache

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Classify this ticket: the GPU node reboots under load.",
    "def ttft(sent, first): return first - sent",
]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    backend.train_from_iterator(SENTENCES * 10, trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    backend.save(str(path))
    return load_tokenizer(path)


@pytest.fixture(autouse=True)
def hf_cache(tmp_path, monkeypatch) -> Path:
    """Every test starts with an empty cache, so a developer's real cache cannot leak in."""
    return use_offline_cache(tmp_path / "hf-home", monkeypatch)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def ib_file(path: Path, conversations) -> Path:
    records = [
        {"id": str(i), "conversations": [{"role": r, "content": c} for r, c in turns]}
        for i, turns in enumerate(conversations)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


# --- the table ---------------------------------------------------------------------------------


def test_profiles_follow_the_reference_table():
    short = Normal(mean=50, min=30, max=80, variance=10)
    assert list(PROFILES) == ["chat", "code-generation", "classification", "fixed-length"]
    assert PROFILES["code-generation"].prompt == Normal(
        mean=4096, min=3000, max=6000, variance=1000
    )
    assert PROFILES["code-generation"].output == short
    assert PROFILES["classification"].prompt == Normal(
        mean=10000, min=8000, max=12000, variance=5000
    )
    assert PROFILES["classification"].output == short
    assert PROFILES["chat"].output == Normal(mean=800, min=50, max=800, variance=100)
    assert (PROFILES["fixed-length"].prompt, PROFILES["fixed-length"].output) == (
        Fixed(tokens=200),
        Fixed(tokens=800),
    )
    files = {name: p.dataset_file for name, p in PROFILES.items()}
    assert files == {
        "chat": "share_gpt_turns.json",
        "code-generation": "github_code.json",
        "classification": "classification.json",
        "fixed-length": None,
    }
    assert [p.shares_prefix for p in PROFILES.values()] == [True, False, True, False]


def test_unknown_profile_lists_the_valid_names():
    with pytest.raises(ValueError) as info:
        get_profile("summarization")
    assert str(info.value) == (
        "unknown profile 'summarization'; valid profiles: "
        "chat, code-generation, classification, fixed-length"
    )


def test_profile_rejects_bad_fields():
    with pytest.raises(
        ValueError, match=r"^Profile.prefix must be 'none', 'documents' or 'history', got 'x'$"
    ):
        PROFILES["chat"].__class__(
            name="p", prompt=Fixed(tokens=1), output=Fixed(tokens=1), dataset_file=None, prefix="x"
        )


# --- synthesized -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["code-generation", "classification", "fixed-length"])
@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_synthesized_lengths_stay_in_the_scaled_bounds(tok, name, scale):
    profile = PROFILES[name].scaled(scale)
    requests = profile_requests(name, 300, tok, rng(), scale=scale)
    assert len(requests) == 300
    assert all(len(r.prompt) == r.prompt_tokens for r in requests)
    assert not {t for r in requests for t in r.prompt} & tok.special_ids
    prompts = np.array([r.prompt_tokens for r in requests])
    outputs = np.array([r.output_tokens for r in requests])
    assert profile.prompt.bounds[0] <= prompts.min() and prompts.max() <= profile.prompt.bounds[1]
    assert profile.output.bounds[0] <= outputs.min() and outputs.max() <= profile.output.bounds[1]


def test_scale_a_tenth_fits_the_tiny_cpu_model(tok):
    requests = profile_requests("classification", 200, tok, rng(), scale=0.1)
    assert max(r.prompt_tokens + r.output_tokens for r in requests) <= 1200 + 8 < 2048
    assert abs(np.mean([r.prompt_tokens for r in requests]) - 1000) < 50


def test_same_seed_same_requests_different_seed_differs(tok):
    for name in PROFILES:
        assert profile_requests(name, 40, tok, rng(3)) == profile_requests(name, 40, tok, rng(3))
        assert profile_requests(name, 40, tok, rng(3)) != profile_requests(name, 40, tok, rng(4))


def test_classification_reuses_few_documents_with_unique_questions(tok):
    requests = profile_requests("classification", 64, tok, rng(), scale=0.1)
    heads = {r.prompt[:700] for r in requests}  # 700 < the shortest prompt less its question
    assert len(heads) == 8
    questions = [r.prompt[-3:] for r in requests]  # 32 tokens scaled to 3
    assert len(set(questions)) == 64
    # Every prompt is its document's head: the tokens before its question are cacheable.
    docs = {r.prompt[:700]: r.prompt for r in requests if r.prompt_tokens == 1200}
    for r in requests:
        longest = docs.get(r.prompt[:700])
        if longest is not None:
            assert r.prompt[:-3] == longest[: r.prompt_tokens - 3]


def test_chat_replays_history_turn_after_turn(tok):
    turns = PROFILES["chat"].turns
    requests = profile_requests("chat", 3 * turns, tok, rng(), scale=0.1)
    by_turn = [requests[k * 3 : (k + 1) * 3] for k in range(turns)]  # turn k of all conversations
    for k in range(1, turns):
        for prev, cur in zip(by_turn[k - 1], by_turn[k], strict=True):
            assert cur.prompt[: prev.prompt_tokens] == prev.prompt
            assert (
                cur.prompt_tokens > prev.prompt_tokens + prev.output_tokens
            )  # + reply + next turn
            assert cur.output_tokens == prev.output_tokens  # fixed per conversation, as there
    assert len({r.prompt[:2] for r in by_turn[0]}) == 3


# --- datasets ----------------------------------------------------------------------------------


def long_texts(count: int, words: int) -> list[str]:
    return [
        " ".join(f"{SENTENCES[(i + j) % 3]} #{i}.{j}" for j in range(words // 8))
        for i in range(count)
    ]


def test_dataset_prompts_are_heads_of_the_file_texts(tok, tmp_path):
    texts = long_texts(5, 400)
    path = ib_file(tmp_path / "code.json", [[("user", t), ("assistant", "ok")] for t in texts])
    requests = profile_requests("code-generation", 20, tok, rng(), dataset_path=path, scale=0.05)
    encoded = [tuple(tok.encode(t)) for t in texts]
    for r in requests:
        assert any(e[: r.prompt_tokens] == r.prompt for e in encoded)
        assert 150 <= r.prompt_tokens <= 300  # 3000..6000 at 0.05


def test_dataset_too_short_for_the_profile(tok, tmp_path):
    path = ib_file(tmp_path / "short.json", [[("user", "tiny prompt")]])
    with pytest.raises(DatasetError) as info:
        profile_requests("fixed-length", 2, tok, rng(), dataset_path=path)
    longest = len(tok.encode("tiny prompt"))
    assert str(info.value) == (
        f"{path}: no prompt has 200 tokens (the longest has {longest}); "
        "use a smaller scale or a file with longer prompts"
    )


def test_explicit_dataset_path_must_exist(tok, tmp_path):
    with pytest.raises(DatasetError) as info:
        profile_requests("chat", 2, tok, rng(), dataset_path=tmp_path / "nope.json")
    assert (
        str(info.value)
        == f"{tmp_path / 'nope.json'}: no such file; pass a local copy of share_gpt_turns.json"
    )


def test_chat_dataset_builds_histories_from_the_conversations(tok, tmp_path):
    conversations = [
        [
            ("system", "Be brief."),
            ("user", "What is TTFT?"),
            ("assistant", "Time to first token."),
            ("user", "And TPOT?"),
        ],
        [("user", "Hello"), ("assistant", "Hi!"), ("user", "Bye")],
    ]
    path = ib_file(tmp_path / "chat.json", conversations)
    requests = profile_requests("chat", 4, tok, rng(), dataset_path=path)
    got = {tok.decode(r.prompt) for r in requests}
    assert got == {
        "Be brief.\nWhat is TTFT?",
        "Be brief.\nWhat is TTFT?\nTime to first token.\nAnd TPOT?",
        "Hello",
        "Hello\nHi!\nBye",
    }
    assert all(50 <= r.output_tokens <= 800 for r in requests)
    # Each conversation's first turn before any second turn; n above the file's 4 turns cycles.
    assert {tok.decode(r.prompt) for r in requests[:2]} == {"Be brief.\nWhat is TTFT?", "Hello"}
    assert len(profile_requests("chat", 9, tok, rng(), dataset_path=path)) == 9


# --- the Hugging Face cache --------------------------------------------------------------------


def commit(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()


def cached(cache: Path, filename: str, texts, revision: str = commit("abc"),
           refs: tuple[str, ...] = ("main",)) -> Path:
    """`filename` (inference-benchmarker conversations of one user turn each) in a snapshot of
    the profiles' dataset repo, laid out as huggingface_hub writes its cache."""
    source = ib_file(cache.parent / "src" / revision / filename, [[("user", t)] for t in texts])
    snapshot = add_snapshot(cache, DATASET_REPO, {filename: source.read_bytes()}, revision,
                            refs=refs, repo_type="dataset")
    return snapshot / filename


def test_cached_dataset_is_found_and_used(tok, hf_cache):
    path = cached(hf_cache, "github_code.json", long_texts(3, 400))
    assert find_cached_dataset("github_code.json") == path
    assert resolve_dataset("code-generation") == path
    assert resolve_dataset("code-generation", search_cache=False) is None
    from_cache = profile_requests("code-generation", 5, tok, rng(), scale=0.05)
    encoded = [tuple(tok.encode(t)) for t in long_texts(3, 400)]
    assert all(any(e[: r.prompt_tokens] == r.prompt for e in encoded) for r in from_cache)
    synthetic = profile_requests("code-generation", 5, tok, rng(), scale=0.05, search_cache=False)
    assert [r.prompt_tokens for r in synthetic] == [r.prompt_tokens for r in from_cache]
    assert synthetic != from_cache


def test_the_main_branch_is_used_as_huggingface_hub_finds_it(hf_cache):
    """huggingface_hub's own lookup: the snapshot refs/main names, whatever else is cached."""
    cached(hf_cache, "classification.json", ["old"], revision=commit("old"), refs=("v0",))
    main = cached(hf_cache, "classification.json", ["new"], revision=commit("new"))
    assert find_cached_dataset("classification.json") == main
    cached(hf_cache, "github_code.json", ["old"], revision=commit("older"), refs=())
    assert find_cached_dataset("github_code.json") is None  # in no snapshot main names


def test_no_cache_means_synthesized(tok):
    assert resolve_dataset("classification") is None
    assert len(profile_requests("classification", 3, tok, rng(), scale=0.1)) == 3


@pytest.mark.skipif(
    not (TINY_LLAMA / "tokenizer.json").is_file(), reason="tiny-llama not generated yet"
)
def test_every_profile_with_the_tiny_llama_tokenizer_at_a_tenth():
    tiny = load_tokenizer(TINY_LLAMA)
    for name in PROFILES:
        requests = profile_requests(name, 100, tiny, rng(), scale=0.1)
        assert all(len(r.prompt) == r.prompt_tokens for r in requests)
        assert max(r.prompt_tokens + r.output_tokens for r in requests) < 2048
        assert max(t for r in requests for t in r.prompt) < tiny.vocab_size
