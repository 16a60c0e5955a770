"""Make the tiny Llama as a GGUF file for llama.cpp's server: suites/models/tiny-llama with random
weights, nothing downloaded but llama-cpp-python's own source package (for its converter).

    python scripts/tiny_gguf.py OUT.gguf [--sdist-dir DIR]

tests/integration/test_llamacpp.py calls `make_tiny_gguf` from a session fixture. The steps:

1. `transformers.LlamaForCausalLM(config)` from suites/models/tiny-llama/config.json, seeded,
   saved with `save_pretrained` beside a copy of the tokenizer files (vLLM serves the same
   architecture with load_format="dummy": random weights, as here).
2. llama.cpp's `convert_hf_to_gguf.py`, from the llama-cpp-python sdist of the version installed
   (`pip download --no-binary :all: --no-deps llama-cpp-python==VERSION`; pip's cache keeps it),
   run in a child process with its `gguf-py/` and `conversion/` importable, at f32 (13 MB).

The converter recognises a tokenizer's pre-tokenizer by hashing how it splits a test string, and
refuses the tiny model's generated one ("BPE pre-tokenizer was not recognized"). Its splitting
is GPT-2's byte-level regex (scripts/make_tiny_model.py, `pre_tokenizers.ByteLevel`), which
llama.cpp knows as "gpt-2", so that is what `get_vocab_base_pre` answers here: llama.cpp then
splits text as the test's tokenizer does, and a text prompt has the same length on both sides
(the server's usage.prompt_tokens was the tokenizer's count plus BOS for 40 of 40 random
prompts: docs/deployments.md, "llama.cpp's server, as measured").
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "suites" / "models" / "tiny-llama"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "generation_config.json")
CONVERTER_PARTS = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")
PRE_TOKENIZER = "gpt-2"  # llama.cpp's name for GPT-2's byte-level split (src/llama-vocab.cpp)
SEED = 0


def make_tiny_gguf(out: Path, sdist_dir: Path) -> Path:
    """Write the tiny Llama to `out` (a .gguf file) unless it is there already; `sdist_dir`
    holds (or receives) the llama-cpp-python sdist whose converter writes it."""
    out = Path(out)
    if out.is_file():
        return out
    converter = _converter_dir(Path(sdist_dir))
    with tempfile.TemporaryDirectory(prefix="tiny-llama-hf-") as work:
        model_dir = _save_random_weights(Path(work))
        partial = out.with_suffix(".partial")
        _convert(converter, model_dir, partial)
        partial.replace(out)  # a killed conversion never leaves a file that looks finished
    return out


def _save_random_weights(work: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig.from_dict(json.loads((TINY / "config.json").read_text()))
    config.dtype = "float32"
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config)
    model.save_pretrained(work)
    for name in TOKENIZER_FILES:
        shutil.copy(TINY / name, work / name)
    return work


def _converter_dir(sdist_dir: Path) -> Path:
    """vendor/llama.cpp of the installed llama-cpp-python's sdist, unpacked under `sdist_dir`."""
    version = importlib.metadata.version("llama-cpp-python")
    unpacked = sdist_dir / f"llama_cpp_python-{version}"
    vendor = unpacked / "vendor" / "llama.cpp"
    if (vendor / "convert_hf_to_gguf.py").is_file():
        return vendor
    archive = sdist_dir / f"llama_cpp_python-{version}.tar.gz"
    if not archive.is_file():
        sdist_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:",
                        "--no-deps", f"llama-cpp-python=={version}", "-d", str(sdist_dir)],
                       check=True)
    # Only the converter and what it imports (a few MB of the 170 the sdist unpacks to).
    wanted = tuple(f"llama_cpp_python-{version}/vendor/llama.cpp/{part}"
                   for part in CONVERTER_PARTS)
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(wanted)]
        tar.extractall(sdist_dir, members=members, filter="data")
    archive.unlink()  # pip's cache keeps it
    return vendor


def _convert(vendor: Path, model_dir: Path, out: Path) -> None:
    """The converter in a child process (it keeps module state and reads sys.argv), with
    `get_vocab_base_pre` answering PRE_TOKENIZER."""
    program = (
        "import sys\n"
        f"sys.path[:0] = [{str(vendor)!r}, {str(vendor / 'gguf-py')!r}]\n"
        f"sys.argv = ['convert_hf_to_gguf.py', {str(model_dir)!r}, '--outfile', {str(out)!r},"
        " '--outtype', 'f32']\n"
        "import runpy, conversion.base as base\n"
        f"base.TextModel.get_vocab_base_pre = lambda self, tokenizer: {PRE_TOKENIZER!r}\n"
        f"runpy.run_path({str(vendor / 'convert_hf_to_gguf.py')!r}, run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    if done.returncode != 0 or not out.is_file():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise RuntimeError(f"convert_hf_to_gguf.py failed (exit {done.returncode}):\n{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sdist-dir", type=Path, default=Path(tempfile.gettempdir())
                        / "llmperf-llama-cpp-sdist")
    args = parser.parse_args()
    print(make_tiny_gguf(args.out, args.sdist_dir))


if __name__ == "__main__":
    main()
