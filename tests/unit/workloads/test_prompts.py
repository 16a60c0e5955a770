"""Prompt generators and length distributions, with real tokenizers built by `tokenizers`."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from pytest_llmperf.records import Request
from pytest_llmperf.workloads.lengths import Fixed, Normal, Uniform
from pytest_llmperf.workloads.prompts import (
    MAX_TEXT_ROUNDS,
    load_tokenizer,
    make_requests,
    shared_prefix_prompts,
    text_prompts,
    token_id_prompts,
)
from tests.conftest import TINY_LLAMA

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Performance regression tests for LLM inference engines, every night.",
    "def tpot(e2el, ttft, n): return (e2el - ttft) / (n - 1)  # seconds",
    "Ünïcödé and emoji 🙂 make byte-level tokenizers split characters.",
]


def _train(kind: str, path: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if kind == "wordlevel":
        tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "[BOS]"])
    elif kind == "metaspace-bpe":  # sentencepiece-like, as Llama 2 / Mistral
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer, tok.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"])
    else:  # byte-level BPE, as GPT-2 / Llama 3
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        trainer = trainers.BpeTrainer(
            vocab_size=400, special_tokens=["<|eot|>"], initial_alphabet=alphabet
        )
    tok.train_from_iterator(CORPUS * 10, trainer)
    tok.save(str(path))
    return path


@pytest.fixture(
    scope="module", params=["bytelevel-bpe", "metaspace-bpe", "wordlevel", "tiny-llama"]
)
def tokenizer(request, tmp_path_factory):
    if request.param == "tiny-llama":
        if not (TINY_LLAMA / "tokenizer.json").is_file():
            pytest.skip("suites/models/tiny-llama/tokenizer.json not generated yet")
        return load_tokenizer(TINY_LLAMA)
    return load_tokenizer(_train(request.param, tmp_path_factory.mktemp("tok") / "tokenizer.json"))


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return load_tokenizer(
        _train("bytelevel-bpe", tmp_path_factory.mktemp("bpe") / "tokenizer.json").parent
    )


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# --- tokenizer loading -------------------------------------------------------------------------


def test_load_tokenizer_from_directory_reports_vocab_and_specials(bpe):
    assert bpe.special_ids == frozenset({0})
    assert bpe.vocab_size == bpe.backend.get_vocab_size(with_added_tokens=True)
    ids = bpe.encode("The quick brown fox")
    assert ids and 0 not in ids
    assert bpe.decode(ids) == "The quick brown fox"


def test_load_tokenizer_missing_names_path_and_fix(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_tokenizer(tmp_path)
    assert str(info.value) == (
        f"{tmp_path}: no tokenizer.json; point at a local model directory that has one "
        "(e.g. save it there with transformers' AutoTokenizer.save_pretrained)"
    )


# --- distributions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Fixed(tokens=-1), "Fixed.tokens must be an integer >= 0, got -1"),
        (lambda: Fixed(tokens=2.5), "Fixed.tokens must be an integer >= 0, got 2.5"),
        (
            lambda: Uniform(mean=100, range_ratio=1.0),
            "Uniform.range_ratio must be in [0, 1), got 1.0",
        ),
        (lambda: Uniform(mean=-5), "Uniform.mean must be an integer >= 0, got -5"),
        (
            lambda: Normal(mean=5, min=10, max=20, variance=1),
            "Normal.mean must lie in [min, max] = [10, 20], got 5",
        ),
        (
            lambda: Normal(mean=15, min=10, max=20, variance=-1),
            "Normal.variance must be a finite number >= 0, got -1",
        ),
        (
            lambda: Normal(mean=15, min=True, max=20, variance=1),
            "Normal.min must be an integer >= 0, got True",
        ),
    ],
)
def test_distribution_validation_names_the_field(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == message


def test_distributions_are_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        Fixed(5)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        Fixed(tokens=5).tokens = 6  # type: ignore[misc]


def test_uniform_matches_vllm_bounds_and_mean():
    dist = Uniform(mean=101, range_ratio=0.5)
    assert dist.bounds == (50, 152)  # floor(50.5), ceil(151.5), as vLLM's random dataset
    values = dist.sample(rng(), 2000)
    assert values.dtype == np.int64 and len(values) == 2000
    assert values.min() == 50 and values.max() == 152
    assert abs(values.mean() - 101) < 2.0  # std of the mean: 29.7 / sqrt(2000) = 0.66


def test_normal_variance_is_a_standard_deviation_like_inference_benchmarker():
    values = Normal(mean=1000, min=0, max=2000, variance=100).sample(rng(), 2000)
    assert 95 < values.std() < 105  # it would be ~10 if "variance" were a variance
    assert abs(values.mean() - 999.5) < 10  # floored draws: mean - 0.5


def test_normal_clips_to_bounds_with_mass_on_them():
    # classification's prompt lengths: P(x < 8000) = P(Z < -0.4) = 0.345, same above 12000.
    values = Normal(mean=10000, min=8000, max=12000, variance=5000).sample(rng(), 2000)
    assert values.min() == 8000 and values.max() == 12000
    assert abs((values == 8000).mean() - 0.345) < 0.045  # std of a proportion here: 0.011
    assert abs((values == 12000).mean() - 0.345) < 0.045
    assert abs(values.mean() - 10000) < 100


def test_fixed_and_scaled():
    assert Fixed(tokens=200).sample(rng(), 3).tolist() == [200, 200, 200]
    assert Fixed(tokens=200).scaled(0.1) == Fixed(tokens=20)
    assert Uniform(mean=1000, range_ratio=0.2).scaled(0.5) == Uniform(mean=500, range_ratio=0.2)
    assert Normal(mean=50, min=30, max=80, variance=10).scaled(0.1) == Normal(
        mean=5, min=3, max=8, variance=1.0
    )
    assert Fixed(tokens=3).scaled(0.01) == Fixed(tokens=1)  # never 0 from a non-zero length
    with pytest.raises(ValueError, match=r"^scale must be a finite number > 0, got 0$"):
        Fixed(tokens=3).scaled(0)


def test_same_seed_same_lengths_different_seed_differs():
    dist = Normal(mean=4096, min=3000, max=6000, variance=1000)
    assert dist.sample(rng(1), 50).tolist() == dist.sample(rng(1), 50).tolist()
    assert dist.sample(rng(1), 50).tolist() != dist.sample(rng(2), 50).tolist()


# --- token-id prompts --------------------------------------------------------------------------


def test_token_id_prompts_exact_lengths_without_special_ids(bpe):
    lengths = [0, 1, 7, 300]
    prompts = token_id_prompts(lengths, bpe, rng())
    assert [len(p) for p in prompts] == lengths
    ids = {t for p in prompts for t in p}
    assert not ids & bpe.special_ids
    assert all(isinstance(t, int) and 0 <= t < bpe.vocab_size for t in ids)


def test_token_id_prompts_accept_a_vocab_size_and_are_seeded():
    a = token_id_prompts([50, 60], 32000, rng(7))
    assert a == token_id_prompts([50, 60], 32000, rng(7))
    assert a != token_id_prompts([50, 60], 32000, rng(8))
    assert max(t for p in a for t in p) < 32000


# --- text prompts ------------------------------------------------------------------------------


def test_text_prompts_encode_to_exactly_the_asked_lengths(tokenizer):
    lengths = [0, 1, 2, 3, 5, 17, 64, 250] + Uniform(mean=120, range_ratio=0.9).sample(
        rng(3), 40
    ).tolist()
    texts = text_prompts(lengths, tokenizer, rng(3))
    encoded = [tokenizer.encode(t) for t in texts]
    assert [len(e) for e in encoded] == lengths
    assert not {t for e in encoded for t in e} & tokenizer.special_ids


def test_text_prompts_are_seeded(bpe):
    assert text_prompts([40, 41], bpe, rng(5)) == text_prompts([40, 41], bpe, rng(5))
    assert text_prompts([40, 41], bpe, rng(5)) != text_prompts([40, 41], bpe, rng(6))


class _NeverRoundTrips:
    """Encodes every text to one token more than it was decoded from."""

    vocab_size = 100
    special_ids = frozenset({0})

    def encode(self, text: str) -> list[int]:
        return [1] * (len(text.split()) + 1)

    def decode(self, ids) -> str:
        return " ".join("w" for _ in ids)


def test_text_prompts_give_up_with_a_clear_error():
    with pytest.raises(ValueError) as info:
        text_prompts([5], _NeverRoundTrips(), rng())
    assert str(info.value) == (
        f"text_prompts: no text of exactly 5 tokens after {MAX_TEXT_ROUNDS} "
        "decode/re-encode rounds (closest: 6); this tokenizer does not round-trip random ids, "
        "use token_id_prompts instead"
    )


# --- shared prefixes ---------------------------------------------------------------------------


def test_shared_prefixes_round_robin(bpe):
    suffixes = [3, 0, 5, 8, 1, 2, 9]
    prompts = shared_prefix_prompts(3, 20, suffixes, bpe, rng())
    heads = [p[:20] for p in prompts]
    assert len(set(heads)) == 3
    assert heads[0:3] == heads[3:6] and heads[6] == heads[0]
    assert len({h[0] for h in set(heads)}) == 3  # distinct first tokens: no shared cache block
    assert [len(p) - 20 for p in prompts] == suffixes
    tails = [p[20:] for p in prompts if len(p) > 21]
    assert len(set(tails)) == len(tails)


def test_shared_prefixes_random_assignment_is_seeded(bpe):
    a = shared_prefix_prompts(4, 10, [2] * 200, bpe, rng(1), assignment="random")
    assert a == shared_prefix_prompts(4, 10, [2] * 200, bpe, rng(1), assignment="random")
    assert a != shared_prefix_prompts(4, 10, [2] * 200, bpe, rng(2), assignment="random")
    counts = {}
    for p in a:
        counts[p[:10]] = counts.get(p[:10], 0) + 1
    assert len(counts) == 4 and min(counts.values()) > 25
    heads = [p[:10] for p in a]
    assert heads[:4] != heads[4:8]  # not round-robin


def test_shared_prefixes_need_enough_token_ids():
    with pytest.raises(ValueError, match=r"^num_prefixes \(11\) exceeds the 10 usable token ids$"):
        shared_prefix_prompts(11, 4, [1], 10, rng())


# --- requests ----------------------------------------------------------------------------------


def test_make_requests_pairs_prompts_and_lengths():
    got = make_requests([(5, 6, 7), ()], np.array([3, 1]))
    assert got == [Request(prompt=(5, 6, 7), prompt_tokens=3, output_tokens=3), Request((), 0, 1)]
    assert type(got[0].prompt[0]) is int and type(got[0].output_tokens) is int
    texts = make_requests(["hi there"], [4], prompt_lengths=[2])
    assert texts == [Request(prompt="hi there", prompt_tokens=2, output_tokens=4)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ([(1,), "text"], [4, 4]),
            "text prompt 1 has no token count; pass prompt_lengths "
            "(the prompts text_prompts returns carry theirs)",
        ),
        (
            ([(1,)], [0]),
            "output lengths must be >= 1 (a request generates at least one token), got 0",
        ),
        (([(1,), (2,)], [4]), "2 prompts but 1 output lengths"),
    ],
)
def test_make_requests_errors(args, message):
    with pytest.raises(ValueError) as info:
        make_requests(*args)
    assert str(info.value) == message


def test_text_prompts_make_requests_end_to_end(bpe):
    lengths = Uniform(mean=30, range_ratio=0.5).sample(rng(), 10)
    texts = text_prompts(lengths, bpe, rng())
    assert [t.tokens for t in texts] == lengths.tolist()
    assert pickle.loads(pickle.dumps(texts)) == texts
    assert [pickle.loads(pickle.dumps(t)).tokens for t in texts] == lengths.tolist()
    requests = make_requests(texts, [8] * 10)  # the counts travel with the texts
    assert [r.prompt_tokens for r in requests] == lengths.tolist()
    assert all(len(bpe.encode(r.prompt)) == r.prompt_tokens for r in requests)
    assert all(type(r.prompt) is str for r in requests)
