"""The CPU suite, images: chat requests with seeded noise images on a tiny vision-language model
of the project's own (suites/models/tiny-llava, made by scripts/make_tiny_llava_model.py: a CLIP
vision tower and tiny-llama as a Llava, random weights), and where their TTFT went.

A vision-language model is an engine of its own (about 50 s to start here), so the measurements
are `nightly`: `pytest -m cpu suites/ --llmperf-nightly` runs them, the quick main job leaves
them out. The -v output shows each test's TTFT split (queue + prefill + hand-off + frontend and
wire, metrics/phases.py), and the run file holds the same means under "metrics"
(docs/workloads.md, "Images"). The bad-input line starts no engine, so the main job runs it.
"""

import pytest

from pytest_llmperf import Workload
from suites.tiny import CPU_GATED, CPU_TOLERANCE, MODELS, TINY_CPU

# vLLM 0.32.0's own Llava cannot be loaded without torchvision, which scripts/install-cpu removes:
# vllm/model_executor/models/llava.py imports pixtral.py, which imports transformers' Pixtral
# image processor, written on torchvision alone. Its Transformers modeling backend
# (TransformersMultiModalForCausalLM) runs the same checkpoint through transformers' modeling
# code and vLLM's multimodal pipeline (renderer, processor, encoder cache, attention), and
# imports none (docs/workloads.md, "Images").
LLAVA_CPU = TINY_CPU.replace(model=str(MODELS / "tiny-llava"),
                             extra_args={"model-impl": "transformers"})
TOKENS_PER_IMAGE = 64  # tiny-llava's 64x64 crop in 8x8 patches, whatever the image's size
INPUT_TOKENS, OUTPUT_TOKENS, REQUESTS = 32, 8, 16
# tiny-llava's chat template around a user message: "<s>user: " before it (<s>, user, :, space)
# and "\nassistant:" after it (newline, ass, ist, ant, :) in its tokenizer's tokens.
TEMPLATE_TOKENS = 9

pytestmark = [pytest.mark.cpu, pytest.mark.engine(LLAVA_CPU),
              pytest.mark.llmperf(tolerance=CPU_TOLERANCE, gate=CPU_GATED)]


@pytest.mark.nightly
@pytest.mark.parametrize("images, width, height", [(1, 256, 256), (4, 640, 480)])
def test_images_ttft_and_where_it_went(llmperf, images, width, height):
    """16 requests, 2 at a time, each with `images` noise PNGs of width x height and 32 text
    tokens: every image reaches the model as its 64 tokens (the server's prompt count grows by
    exactly that per image over a request's text and template), and the TTFT mean is split into
    the engine's phases."""
    result = llmperf.run(Workload.images(images_per_request=images, width=width, height=height,
                                         input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS,
                                         num_requests=REQUESTS, concurrency=2,
                                         warmup_requests=2))
    assert result.completed == REQUESTS, result.failures_text()
    template = {r.usage_prompt_tokens - images * TOKENS_PER_IMAGE - INPUT_TOKENS
                for r in result.records}
    assert template == {TEMPLATE_TOKENS}, "each request's prompt: template + text + images"
    split = result.ttft_split
    assert [label for label, _ in split.parts] == ["queue", "prefill", "hand-off",
                                                   "frontend and wire"]
    assert split.total == pytest.approx(result.ttft_s.mean)
    assert sum(seconds for _, seconds in split.parts) == pytest.approx(split.total)


def test_images_for_a_text_only_model_are_one_line(llmperf):
    """Refused before anything is sent or started (engines/image_input.py); the plugin fails
    the test with the line alone."""
    with pytest.raises(pytest.fail.Exception) as caught:
        llmperf.run(Workload.images(width=64, height=64, input_tokens=8, output_tokens=4,
                                    num_requests=1, concurrency=1), engine=TINY_CPU)
    assert str(caught.value) == (
        f"Workload 'images-1x64x64-8in-4out' sends 1 image(s) a request, but engine model "
        f"{TINY_CPU.model} is not a vision-language model (its config.json has no vision_config "
        "and it ships no preprocessor_config.json): give the test a model that takes images "
        "(suites/models/tiny-llava, made by scripts/make_tiny_llava_model.py), or send text "
        "only with Workload.fixed(..., api='chat')")
