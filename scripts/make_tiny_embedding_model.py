"""Generate suites/models/tiny-llama-embed: the tiny embedding model the CPU suite's embeddings
test serves (suites/test_cpu_embeddings.py).

    python scripts/make_tiny_embedding_model.py [--out suites/models/tiny-llama-embed]

Needs only the standard library. Running it twice gives byte-identical files.

What it writes, and why
- config.json: suites/models/tiny-llama's architecture (2 layers, hidden 256, vocab 4096; made by
  scripts/make_tiny_model.py) named `LlamaModel` (the bare transformer, no LM head), as a
  decoder-based embedding model's checkpoint names it. No weights: served with
  `load_format="dummy"`, nothing downloaded. The embeddings mean nothing; their count, size and
  timing are what a test measures.
- modules.json, 1_Pooling/config.json: the sentence-transformers files that make it an embedding
  model, in the layout Qwen3-Embedding ships (https://huggingface.co/Qwen/Qwen3-Embedding-0.6B:
  Transformer, then last-token pooling, then Normalize). vLLM 0.32 reads them (`get_pooling_config`
  in vllm/transformers_utils/config.py) and so picks the pooling runner by itself
  (`_get_default_runner_type` in vllm/config/model.py): without them a `LlamaModel` is served
  as a generating model unless started with `--runner pooling`. The pooling is the last token's
  hidden state, normalized.
- tokenizer.json, tokenizer_config.json, special_tokens_map.json: tiny-llama's, copied as they are
  (the prompts are token ids of that vocabulary).
"""

from __future__ import annotations

from tiny_derived import SOURCE, derived_folder, read_json, write_json

COPIED = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize",
     "type": "sentence_transformers.models.Normalize"},
]
POOLING_MODES = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens",
                 "weightedmean_tokens", "lasttoken")


def main() -> None:
    out = derived_folder(__doc__.splitlines()[0], "tiny-llama-embed", COPIED)
    config = read_json(SOURCE / "config.json")
    config["architectures"] = ["LlamaModel"]
    write_json(out / "config.json", config)
    write_json(out / "modules.json", MODULES)
    write_json(out / "1_Pooling" / "config.json", {
        "word_embedding_dimension": config["hidden_size"], "include_prompt": True,
        **{f"pooling_mode_{mode}": mode == "lasttoken" for mode in POOLING_MODES}})
    print(f"wrote {out}: {config['architectures'][0]}, last-token pooling, "
          f"{config['hidden_size']} dimensions, vocab {config['vocab_size']}")


if __name__ == "__main__":
    main()
