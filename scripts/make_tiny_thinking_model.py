"""Generate suites/models/tiny-llama-think: the tiny model the CPU suite's reasoning test serves
as a reasoning model (suites/test_cpu_reasoning.py).

    python scripts/make_tiny_thinking_model.py [--out suites/models/tiny-llama-think]

What it writes, and why
- tokenizer.json: tiny-llama's (scripts/make_tiny_model.py), with `<think>` and `</think>` added
  after its vocabulary (ids 4096 and 4097), not special, as DeepSeek-R1's tokenizer has them: a
  reasoning parser ("deepseek_r1", vllm/reasoning/basic_parsers.py) finds the thinking by these
  two tokens' ids, and refuses a tokenizer that lacks them.
- config.json: tiny-llama's, its vocabulary two larger, plus what the engine's logits processor
  reads (pytest_llmperf/engines/thinking_model.py): `llmperf_think_tokens`, how many tokens each
  request thinks (THINK_TOKENS), and the two markers' ids. Served with
  `--logits-processors pytest_llmperf.engines.thinking_model:ThinkFirst`, every output is
  `<think>`, THINK_TOKENS tokens, `</think>`, then the answer: the reasoning the real parser and
  the real stream split, in counts known in advance.
- tokenizer_config.json, special_tokens_map.json, generation_config.json: tiny-llama's, copied
  (its chat template: the model writes `<think>` itself, so the prompt needs none).
"""

from __future__ import annotations

import json

from tiny_derived import SOURCE, derived_folder, read_json, write_json

COPIED = ("special_tokens_map.json", "generation_config.json", "tokenizer_config.json")
MARKERS = ("<think>", "</think>")
THINK_TOKENS = 8


def with_markers(tokenizer: dict) -> tuple[dict, list[int]]:
    """tiny-llama's tokenizer.json with `<think>` and `</think>` added after its vocabulary,
    and their ids."""
    ids = []
    for marker in MARKERS:
        token_id = len(tokenizer["model"]["vocab"]) + len(ids)
        tokenizer["added_tokens"].append({
            "content": marker, "id": token_id, "lstrip": False, "normalized": False,
            "rstrip": False, "single_word": False, "special": False})
        ids.append(token_id)
    return tokenizer, ids


def main() -> None:
    out = derived_folder(__doc__.splitlines()[0], "tiny-llama-think", COPIED)
    tokenizer, (start_id, end_id) = with_markers(read_json(SOURCE / "tokenizer.json"))
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, indent=2, ensure_ascii=False)
                                        + "\n", encoding="utf-8")
    config = read_json(SOURCE / "config.json")
    config.update(vocab_size=end_id + 1, llmperf_think_tokens=THINK_TOKENS,
                  llmperf_think_start_token_id=start_id, llmperf_think_end_token_id=end_id)
    write_json(out / "config.json", config)
    print(f"wrote {out}: {MARKERS[0]} = {start_id}, {MARKERS[1]} = {end_id}, "
          f"{THINK_TOKENS} tokens of thinking a request")


if __name__ == "__main__":
    main()
