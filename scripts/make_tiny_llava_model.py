"""Generate suites/models/tiny-llava: the tiny vision-language model the CPU suite's images test
serves (suites/test_cpu_images.py).

    python scripts/make_tiny_llava_model.py [--out suites/models/tiny-llava]

Needs only the standard library. Running it twice gives byte-identical files.

What it writes, and why
- config.json: a Llava (`LlavaForConditionalGeneration`, transformers' LlavaConfig): a CLIP
  vision tower, a 2-layer MLP projector, and suites/models/tiny-llama's architecture as the text
  model (made by scripts/make_tiny_model.py), its vocabulary one larger for the `<image>` token.
  No weights: served with `load_format="dummy"`, nothing downloaded; the answers mean nothing,
  the work the engine does for an image (decode, preprocess, encode, the image tokens' prefill)
  is what a test measures. The vision tower: 2 layers, hidden 64, 2 heads, 8x8 patches of a
  64x64 image, so each image becomes 64 tokens (64 patches; the "default" feature selection
  drops CLIP's class token: `get_num_selected_vision_tokens` in
  vllm/model_executor/models/vision.py, vLLM 0.32.0).
- preprocessor_config.json: CLIP's image processor (resize the shortest edge to 64, centre-crop
  64x64, rescale, normalize with CLIP's mean and std), so an image of any size becomes 64 tokens
  and its size changes only what the server decodes and resizes. Without torchvision (which
  scripts/install-cpu removes) transformers 5 loads its PIL backend, `CLIPImageProcessorPil`
  (`_resolve_backend` in transformers/models/auto/image_processing_auto.py).
- processor_config.json: `LlavaProcessor` (what vLLM loads for a Llava, by its own Llava or by
  its Transformers backend, which the CPU suite uses: docs/workloads.md, "Images") with the
  patch size and the class token it counts.
- tokenizer.json, tokenizer_config.json: tiny-llama's, with `<image>` added as special token
  4096 (the config's `image_token_index`) and a chat template that iterates over a message's
  content parts and writes `<image>` for each image part, so vLLM passes parts as they are (its
  "openai" content format: `_detect_content_format` in vllm/renderers/hf.py).
- special_tokens_map.json, generation_config.json: tiny-llama's, copied.
"""

from __future__ import annotations

import json

from tiny_derived import SOURCE, derived_folder, read_json, write_json

COPIED = ("special_tokens_map.json", "generation_config.json")
IMAGE_TOKEN = "<image>"
IMAGE_SIZE, PATCH_SIZE = 64, 8
# CLIP's normalization (https://huggingface.co/openai/clip-vit-large-patch14, its
# preprocessor_config.json), as Llava 1.5 ships it.
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ message['role'] + ': ' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] == 'image' %}{{ '" + IMAGE_TOKEN + "' }}{% endif %}"
    "{% endfor %}{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}")
VISION_CONFIG = {
    "model_type": "clip_vision_model", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 2, "num_channels": 3,
    "image_size": IMAGE_SIZE, "patch_size": PATCH_SIZE, "projection_dim": 64,
    "hidden_act": "quick_gelu", "layer_norm_eps": 1e-05, "attention_dropout": 0.0,
}


def llava_config(text: dict, image_token_id: int) -> dict:
    text = {k: v for k, v in text.items() if k not in ("architectures", "torch_dtype")}
    text["vocab_size"] = image_token_id + 1
    return {
        "architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
        "image_token_index": image_token_id, "image_seq_length": (IMAGE_SIZE // PATCH_SIZE) ** 2,
        "projector_hidden_act": "gelu", "multimodal_projector_bias": True,
        "vision_feature_layer": -2, "vision_feature_select_strategy": "default",
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "text_config": text, "vision_config": VISION_CONFIG,
    }


def image_processor() -> dict:
    return {
        "image_processor_type": "CLIPImageProcessor", "processor_class": "LlavaProcessor",
        "do_resize": True, "size": {"shortest_edge": IMAGE_SIZE}, "resample": 3,
        "do_center_crop": True, "crop_size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
        "image_mean": CLIP_MEAN, "image_std": CLIP_STD, "do_convert_rgb": True,
    }


def with_image_token(tokenizer: dict) -> tuple[dict, int]:
    """tiny-llama's tokenizer.json with `<image>` added after its vocabulary, and its id."""
    token_id = len(tokenizer["model"]["vocab"])
    tokenizer["added_tokens"].append({
        "content": IMAGE_TOKEN, "id": token_id, "lstrip": False, "normalized": False,
        "rstrip": False, "single_word": False, "special": True})
    return tokenizer, token_id


def main() -> None:
    out = derived_folder(__doc__.splitlines()[0], "tiny-llava", COPIED)
    tokenizer, image_token_id = with_image_token(read_json(SOURCE / "tokenizer.json"))
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, indent=2, ensure_ascii=False)
                                        + "\n", encoding="utf-8")
    tokenizer_config = read_json(SOURCE / "tokenizer_config.json")
    tokenizer_config["chat_template"] = CHAT_TEMPLATE
    write_json(out / "tokenizer_config.json", tokenizer_config)
    write_json(out / "config.json", llava_config(read_json(SOURCE / "config.json"),
                                                 image_token_id))
    write_json(out / "preprocessor_config.json", image_processor())
    write_json(out / "processor_config.json", {
        "processor_class": "LlavaProcessor", "image_token": IMAGE_TOKEN,
        "patch_size": PATCH_SIZE, "vision_feature_select_strategy": "default",
        "num_additional_image_tokens": 1})
    print(f"wrote {out}: Llava, CLIP {IMAGE_SIZE}x{IMAGE_SIZE}/{PATCH_SIZE} "
          f"({(IMAGE_SIZE // PATCH_SIZE) ** 2} tokens an image), {IMAGE_TOKEN} = {image_token_id}")


if __name__ == "__main__":
    main()
