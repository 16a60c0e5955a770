"""Images on H100 and H200: LLaVA 1.5 7B with random weights, noise images of a camera's size,
one and four a request, and where their TTFT went (the engine's queue, prefill and hand-off,
in which vLLM decodes and preprocesses the images: docs/workloads.md, "Images").

No publication gives a number for this engine (docs/gpu-suites.md), so nothing is asserted but
the work itself: every request completed, and every image reaching the model as its 576 tokens
(CLIP ViT-L/14 at 336 pixels: 24 x 24 patches), seen in the server's prompt counts. Each test is
gated against the runner's own baseline; `llmperf bootstrap-baselines` makes the first.
"""

import pytest

from pytest_llmperf import Workload
from suites.gpu import LLAVA_7B

TOKENS_PER_IMAGE = 576
INPUT_TOKENS, OUTPUT_TOKENS, REQUESTS = 128, 128, 256

pytestmark = [pytest.mark.h100, pytest.mark.h200, pytest.mark.engine(LLAVA_7B)]


@pytest.mark.parametrize("images", [1, 4])
def test_images_ttft_and_where_it_went(llmperf, images):
    result = llmperf.run(Workload.images(images_per_request=images, width=1280, height=720,
                                         input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS,
                                         num_requests=REQUESTS, concurrency=32,
                                         warmup_requests=4))
    assert result.completed == REQUESTS, result.first_errors()
    template = {r.usage_prompt_tokens - images * TOKENS_PER_IMAGE - INPUT_TOKENS
                for r in result.records}
    assert len(template) == 1, f"prompt tokens beyond text and images differ: {template}"
    assert [label for label, _ in result.ttft_split.parts][:3] == ["queue", "prefill",
                                                                   "hand-off"]
