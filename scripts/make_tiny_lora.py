"""Generate suites/models/tiny-llama-lora: the LoRA adapters the CPU suite serves on the tiny Llama.

    python scripts/make_tiny_lora.py [--out suites/models/tiny-llama-lora]

Each adapter is PEFT's file layout with small random float16 weights, made from
suites/models/tiny-llama/config.json alone by pytest_llmperf/engines/lora_adapters.py
(`write_random_adapter`, which a GPU suite can call for its own model). Running it twice gives
byte-identical files (check with `sha256sum suites/models/tiny-llama-lora/*/*`).

They are committed rather than made at test time: an Engine's identity (baselines, run files)
records each adapter's path, so the path must be the same in every checkout and run, and the
three together are about 150 kB.

- tiny-lora-a: rank 8 on q_proj and v_proj (the PEFT default's targets);
- tiny-lora-b: rank 8 on every attention projection (q, k, v, o);
- tiny-lora-c: rank 16 on q_proj and v_proj, vLLM's default max_lora_rank, so an engine with
  max_lora_rank=8 refuses it (docs/workloads.md, "LoRA adapters").
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_llmperf.engines.lora_adapters import write_random_adapter

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "suites" / "models" / "tiny-llama"
ADAPTERS = {  # name -> (rank, target modules); the seed is the adapter's place here
    "tiny-lora-a": (8, ("q_proj", "v_proj")),
    "tiny-lora-b": (8, ("q_proj", "k_proj", "v_proj", "o_proj")),
    "tiny-lora-c": (16, ("q_proj", "v_proj")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "suites" / "models" / "tiny-llama-lora")
    out = parser.parse_args().out
    for seed, (name, (rank, targets)) in enumerate(ADAPTERS.items()):
        path = write_random_adapter(MODEL, out / name, rank=rank, target_modules=targets,
                                    seed=seed, base_model="tiny-llama")
        print(path, sum(f.stat().st_size for f in path.iterdir()), "bytes")


if __name__ == "__main__":
    main()
