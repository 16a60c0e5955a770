"""LoRA adapters: the random ones the project writes (PEFT's layout, read back by the safetensors
library vLLM uses), the Engine's LoRA fields as vLLM flags, and each line an unfit adapter gets
before its engine starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llmperf.engines.errors import EngineStartError
from pytest_llmperf.engines.lora_adapters import (
    AdapterShape,
    adapter_problem,
    check_adapters,
    read_adapter,
    write_random_adapter,
)
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError
from pytest_llmperf.session.provenance import engine_identity

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "suites" / "models" / "tiny-llama"
TINY_CONFIG = json.loads((TINY / "config.json").read_text())
COMMITTED = ROOT / "suites" / "models" / "tiny-llama-lora"


def test_a_random_adapter_has_peft_layout_and_the_models_shapes(tmp_path):
    path = write_random_adapter(TINY, tmp_path / "a", rank=8, seed=3)
    config = json.loads((path / "adapter_config.json").read_text())
    assert {k: config[k] for k in ("r", "lora_alpha", "target_modules", "peft_type",
                                   "base_model_name_or_path", "bias")} == {
        "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"], "peft_type": "LORA",
        "base_model_name_or_path": "tiny-llama", "bias": "none"}
    from safetensors.numpy import load_file  # the reader vLLM's adapters go through

    tensors = load_file(path / "adapter_model.safetensors")
    # 2 layers x (q, v) x (A, B); hidden 256, 2 KV heads x 64 = 128 for v_proj's output.
    assert {name: value.shape for name, value in tensors.items()} == {
        f"base_model.model.model.layers.{i}.self_attn.{m}.lora_{ab}.weight": shape
        for i in (0, 1) for m, out in (("q_proj", 256), ("v_proj", 128))
        for ab, shape in (("A", (8, 256)), ("B", (out, 8)))}
    assert read_adapter(path) == AdapterShape(8, "tiny-llama",
                                              {"q_proj": (256, 256), "v_proj": (256, 128)})


def test_the_same_arguments_write_the_same_bytes(tmp_path):
    one = write_random_adapter(TINY, tmp_path / "one", seed=1) / "adapter_model.safetensors"
    two = write_random_adapter(TINY, tmp_path / "two", seed=1) / "adapter_model.safetensors"
    other = write_random_adapter(TINY, tmp_path / "x", seed=2) / "adapter_model.safetensors"
    assert one.read_bytes() == two.read_bytes() != other.read_bytes()


def test_the_committed_adapters_are_what_the_script_writes(tmp_path):
    # scripts/make_tiny_lora.py's table, written again: a drifted file would fail here.
    for seed, (name, rank, targets) in enumerate([
            ("tiny-lora-a", 8, ("q_proj", "v_proj")),
            ("tiny-lora-b", 8, ("q_proj", "k_proj", "v_proj", "o_proj")),
            ("tiny-lora-c", 16, ("q_proj", "v_proj"))]):
        made = write_random_adapter(TINY, tmp_path / name, rank=rank, target_modules=targets,
                                    seed=seed, base_model="tiny-llama")
        for file in ("adapter_config.json", "adapter_model.safetensors"):
            assert (made / file).read_bytes() == (COMMITTED / name / file).read_bytes()


def test_a_module_the_model_has_not_is_one_line(tmp_path):
    with pytest.raises(InputError) as raised:
        write_random_adapter(TINY, tmp_path, target_modules=("q_proj", "qkv"))
    assert str(raised.value) == (
        "write_random_adapter: rank must be >= 1 and target_modules among q_proj, k_proj, "
        "v_proj, o_proj, gate_proj, up_proj, down_proj; got rank 8, qkv")


def test_a_missing_adapter_path_is_one_line():
    assert adapter_problem("sql", "/nowhere/sql-lora", TINY_CONFIG, None) == (
        "LoRA adapter 'sql' at /nowhere/sql-lora does not exist; point lora_modules['sql'] at "
        "a PEFT adapter directory (adapter_config.json and adapter_model.safetensors)")


def test_a_hub_id_is_left_to_vllm():
    assert adapter_problem("sql", "acme/sql-lora", TINY_CONFIG, None) is None


def test_a_directory_without_the_adapter_files_is_one_line(tmp_path):
    assert adapter_problem("sql", str(tmp_path), TINY_CONFIG, None) == (
        f"LoRA adapter 'sql' at {tmp_path} has no adapter_config.json and "
        "adapter_model.safetensors; point lora_modules['sql'] at a PEFT adapter directory")


def test_a_rank_above_max_lora_rank_is_one_line(tmp_path):
    path = str(write_random_adapter(TINY, tmp_path, rank=16))
    assert adapter_problem("big", path, TINY_CONFIG, 16) is None
    assert adapter_problem("big", path, TINY_CONFIG, 8) == (
        "LoRA adapter 'big' has rank 16, above max_lora_rank 8; set Engine(max_lora_rank=...) "
        "to 16 or more")
    huge = str(write_random_adapter(TINY, tmp_path / "huge", rank=20))
    assert adapter_problem("huge", huge, TINY_CONFIG, None) == (
        "LoRA adapter 'huge' has rank 20, above vLLM's default max_lora_rank 16; set "
        "Engine(max_lora_rank=...) to 32 or more")


def test_an_adapter_made_for_another_model_is_one_line(tmp_path):
    wider = tmp_path / "wider-llama"
    wider.mkdir()
    (wider / "config.json").write_text(json.dumps({**TINY_CONFIG, "hidden_size": 512}))
    path = str(write_random_adapter(wider, tmp_path / "a"))
    assert adapter_problem("a", path, TINY_CONFIG, None) == (
        "LoRA adapter 'a' was made for another model (its base: 'wider-llama'): its q_proj "
        "maps 512 -> 256 features, the served model's 256 -> 256; serve it on its base model, "
        "or use an adapter made for this one")


def test_check_adapters_names_the_engine_before_it_starts(tmp_path):
    engine = Engine(model=str(TINY), lora_modules={"a": str(tmp_path / "gone")})
    with pytest.raises(EngineStartError) as raised:
        check_adapters(engine)
    assert str(raised.value) == (
        f"vLLM engine {engine.label()!r}: LoRA adapter 'a' at {tmp_path / 'gone'} does not "
        "exist; point lora_modules['a'] at a PEFT adapter directory (adapter_config.json and "
        "adapter_model.safetensors)")
    check_adapters(Engine(model=str(TINY), lora_modules={"a": str(COMMITTED / "tiny-lora-a")}))


def test_lora_fields_are_vllm_flags_and_modules_turn_lora_on():
    engine = Engine(model="m", lora_modules={"b": "/x/b", "a": "/x/a=1,2"}, max_loras=1,
                    max_lora_rank=16)
    assert engine.server_args() == [
        "--model", "m", "--max-loras", "1", "--max-lora-rank", "16", "--enable-lora",
        "--lora-modules", '{"name": "a", "path": "/x/a=1,2"}', '{"name": "b", "path": "/x/b"}']
    assert Engine(model="m", enable_lora=True).server_args() == ["--model", "m",
                                                                 "--enable-lora"]
    assert engine.label() == "m lora=a,b max_loras=1 max_lora_rank=16"
    assert engine.to_dict()["lora_modules"] == {"a": "/x/a=1,2", "b": "/x/b"}


@pytest.mark.parametrize("fields, line", [
    ({"max_lora_rank": 12}, "Engine(max_lora_rank=12): expected one of 1, 8, 16, 32, 64, 128, "
                            "256, 320, 512, or None for vLLM's default"),
    ({"max_loras": 0}, "Engine(max_loras=0): expected a whole number >= 1, or None for vLLM's "
                       "default"),
    ({"lora_modules": ["/x/a"]}, "Engine(lora_modules=['/x/a']): expected a dict of adapter "
                                 "names to PEFT adapter directories, e.g. {'sql-lora': "
                                 "'/adapters/sql'}"),
    ({"enable_lora": False, "lora_modules": {"a": "/x/a"}},
     "Engine(enable_lora=False, lora_modules=...): serving adapters needs LoRA on; leave "
     "enable_lora unset (lora_modules turns it on) or True"),
])
def test_bad_lora_fields_are_one_line_where_the_engine_is_written(fields, line):
    with pytest.raises(InputError) as raised:
        Engine(model="m", **fields)
    assert str(raised.value) == line


def test_another_kind_has_no_lora_fields():
    with pytest.raises(InputError) as raised:
        Engine(model="m.gguf", kind="llamacpp", max_loras=2)
    assert str(raised.value).startswith(
        "Engine(kind='llamacpp', max_loras=2): llama.cpp's server has no max_loras;")


def test_adapters_inside_the_project_are_recorded_by_relative_path():
    engine = Engine(model=str(TINY), lora_modules={"a": str(COMMITTED / "tiny-lora-a"),
                                                   "hub": "acme/sql-lora"})
    assert engine_identity(engine, ROOT)["lora_modules"] == {
        "a": "suites/models/tiny-llama-lora/tiny-lora-a", "hub": "acme/sql-lora"}
