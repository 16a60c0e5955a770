"""Generate suites/models/tiny-llama: the tiny Llama model the CPU suites and integration tests use.

    python scripts/make_tiny_model.py [--out suites/models/tiny-llama]

Needs only the standard library and `tokenizers` (installed with vLLM and transformers). Running
it twice gives byte-identical files (check with `sha256sum suites/models/tiny-llama/*`).

What it writes, and why
- config.json: a Llama architecture (LlamaForCausalLM) and no weights. vLLM serves it with
  `load_format="dummy"` (random weights), so nothing has to be downloaded and nothing large lives
  in the repository. The output is meaningless text; tests control lengths with `ignore_eos` and
  `min_tokens`, never by what the model "says".
  - 2 layers, hidden 256, 4 query heads, 2 KV heads (grouped-query attention as in real Llamas),
    head_dim 64, MLP 512: a few million parameters, fast on 2 CPU cores, yet the same code path
    (attention, GQA, RoPE, SwiGLU) as the big models the GPU suites use.
  - bf16: the dtype real deployments serve. KV cache per token = layers 2 x (K, V) 2 x KV heads 2
    x head_dim 64 x 2 bytes = 1024 bytes, so `--kv-cache-memory-bytes 536870912` holds 524,288
    tokens and a few MiB are enough to force preemptions on purpose.
  - max_position_embeddings 4096: room for long-prompt workloads; servers may cap lower with
    --max-model-len.
  - vocab_size equals the tokenizer's size exactly, so every token id the tokenizer produces is a
    valid embedding row and the random-token-id workloads can draw from range(vocab_size).
  - rope_theta is written both at top level (transformers 4.x) and in rope_parameters
    (transformers 5.x), with the same value.
- tokenizer.json: a byte-level BPE (GPT-2 style: every byte is a base token, so any text encodes
  and nothing maps to <unk>) trained here, offline, on the source text of a fixed list of
  standard-library modules (English docstrings and comments plus Python code), read from the
  running interpreter. 4096 tokens: small embedding tables and a text-to-token ratio close to
  real tokenizers' (a few characters per token), so text prompts have realistic lengths.
  Special tokens follow Llama: <unk>=0, <s>=1 (bos), </s>=2 (eos). The post-processor prepends
  <s> when special tokens are requested, as Llama tokenizers do.
- tokenizer_config.json: PreTrainedTokenizerFast (the generic fast tokenizer: no sentencepiece,
  no Llama-specific conversion), the special tokens, model_max_length, and a minimal chat
  template so /v1/chat/completions works without --chat-template.
- special_tokens_map.json, generation_config.json: the special tokens and bos/eos ids for tools
  that read them from there. generation_config.json deliberately holds no sampling settings:
  vLLM would take them as request defaults.

Determinism: the corpus is the module sources in a fixed order; the BPE trainer is deterministic
for a given corpus and `tokenizers` version; JSON is written with sorted keys. The corpus depends
on the Python minor version (stdlib sources change between releases): the committed files came
from Python 3.11 and tokenizers 0.23; the script prints the corpus digest and the versions so a
difference can be explained. The tests never depend on particular token ids, only on the sizes.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import pathlib
import platform

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

VOCAB_SIZE = 4096
UNK, BOS, EOS = "<unk>", "<s>", "</s>"
SPECIAL_TOKENS = [UNK, BOS, EOS]  # ids 0, 1, 2, as in Llama
MAX_POSITIONS = 4096

# Pure-Python modules present in every CPython 3.11+, a mix of prose-heavy and code-heavy files.
CORPUS_MODULES = [
    "argparse", "ast", "asyncio.base_events", "asyncio.tasks", "calendar", "collections",
    "configparser", "contextlib", "csv", "dataclasses", "datetime", "decimal", "difflib",
    "email.message", "enum", "fractions", "ftplib", "functools", "gettext", "heapq",
    "http.client", "http.server", "imaplib", "inspect", "ipaddress", "json.decoder",
    "json.encoder", "locale", "logging", "logging.handlers", "mailbox", "pathlib", "pdb",
    "pickle", "pydoc", "random", "shutil", "smtplib", "socket", "statistics", "string",
    "subprocess", "tarfile", "tempfile", "textwrap", "threading", "typing", "unittest.case",
    "unittest.mock", "urllib.parse", "urllib.request", "uuid", "zipfile",
]

# Minimal chat template: bos, then "role: content" lines, then "assistant:" when asked. Plain
# strings only, so vLLM detects the "string" content format and renders without extra options.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ message['role'] + ': ' + message['content'] + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}"
)


def corpus_texts() -> list[str]:
    texts = []
    for name in CORPUS_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise SystemExit(f"stdlib module {name!r} has no Python source here")
        texts.append(pathlib.Path(spec.origin).read_text(encoding="utf-8"))
    return texts


def train_tokenizer(texts: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    if tok.get_vocab_size() != VOCAB_SIZE:
        raise SystemExit(f"trained {tok.get_vocab_size()} tokens, wanted {VOCAB_SIZE}")
    return tok


def model_config(vocab_size: int, bos_id: int, eos_id: int) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "initializer_range": 0.02,
        "use_cache": True,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "bfloat16",
    }


def write_json(path: pathlib.Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")


def main() -> None:
    repo = pathlib.Path(__file__).resolve().parent.parent
    default_out = repo / "suites" / "models" / "tiny-llama"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=default_out)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)

    texts = corpus_texts()
    digest = hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()
    tok = train_tokenizer(texts)
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}

    # to_str() orders the vocab by id and the merges by rank; re-dump with sorted keys.
    write_json(out / "tokenizer.json", json.loads(tok.to_str()))
    write_json(out / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS, "eos_token": EOS, "unk_token": UNK,
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    })
    write_json(out / "special_tokens_map.json",
               {"bos_token": BOS, "eos_token": EOS, "unk_token": UNK})
    write_json(out / "generation_config.json", {"bos_token_id": ids[BOS], "eos_token_id": ids[EOS]})
    write_json(out / "config.json", model_config(tok.get_vocab_size(), ids[BOS], ids[EOS]))

    print(f"wrote {out}: vocab {tok.get_vocab_size()}, corpus sha256 {digest[:16]} "
          f"({sum(map(len, texts))} chars), Python {platform.python_version()}, "
          f"tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    main()
