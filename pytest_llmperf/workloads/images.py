"""Images: chat requests that each carry `images_per_request` seeded noise images of `width` x
`height` pixels beside a text prompt of exact length, as OpenAI's content parts
(https://platform.openai.com/docs/api-reference/chat/create: `{"type": "image_url",
"image_url": {"url": "data:image/png;base64,..."}}`), which vLLM's chat endpoint takes for a
multimodal model (https://docs.vllm.ai/en/latest/features/multimodal_inputs.html).

Every image is new noise (drawn from the workload's seeded generator), so no request's image is
one vLLM has seen: its multimodal caches keep an image by its content's hash and would skip the
processing and encoding a repeated one needs. An image costs the server its decode, resize and
encoding and the prefill of its tokens; a vision-language model turns it into a number of tokens
fixed by its processor (64 for suites/models/tiny-llava, whatever its size), which the server's
`usage.prompt_tokens` counts on top of the text's. The PNGs are written with the standard
library (zlib, the PNG spec's chunks: https://www.w3.org/TR/png/), unfiltered RGB.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from pytest_llmperf.errors import InputError
from pytest_llmperf.records import Request
from pytest_llmperf.workloads import prompts
from pytest_llmperf.workloads.source import PromptFormat, Source

__all__ = ["ImagesSource", "noise_png"]

WHERE = "Workload.images"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Compression level 1: noise does not compress, and the client should spend little on trying.
PNG_COMPRESSION = 1


@dataclass(frozen=True, kw_only=True)
class ImagesSource(Source):
    """Chat prompts of `input_tokens` random tokens, each after `images_per_request` noise PNGs
    of `width` x `height`, each request's own."""

    prompt_format: ClassVar[PromptFormat] = "text"  # a chat's messages are text

    images_per_request: int
    width: int
    height: int
    input_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise InputError(f"{WHERE}: an image must be at least 1x1 pixels, got width "
                             f"{self.width} x height {self.height}; give width= and height= of "
                             "1 or more")
        if self.images_per_request < 1:
            raise InputError(f"{WHERE}: images_per_request must be >= 1, got "
                             f"{self.images_per_request}; for requests without images use "
                             "Workload.fixed(..., api='chat')")
        if min(self.input_tokens, self.output_tokens) < 1:
            raise InputError(f"{WHERE}: input_tokens and output_tokens must be >= 1, got "
                             f"{self.input_tokens} and {self.output_tokens}")

    def requests(self, n: int, tokenizer: Any, rng: np.random.Generator) -> list[Request]:
        texts = prompts.text_prompts([self.input_tokens] * n, tokenizer, rng)
        return [replace(request, body=(("messages", self.messages(str(request.prompt), rng)),))
                for request in prompts.make_requests(texts, [self.output_tokens] * n)]

    def messages(self, text: str, rng: np.random.Generator) -> list[dict[str, Any]]:
        """One user message: the images, then the text (the order Llava's examples use)."""
        images = [{"type": "image_url", "image_url": {"url": image_url(
            noise_png(rng, self.width, self.height))}} for _ in range(self.images_per_request)]
        return [{"role": "user", "content": [*images, {"type": "text", "text": text}]}]


def image_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def noise_png(rng: np.random.Generator, width: int, height: int) -> bytes:
    """A PNG of `width` x `height` random RGB pixels drawn from `rng`."""
    pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    # Each scanline starts with its filter type, 0 (none).
    rows = np.concatenate([np.zeros((height, 1), dtype=np.uint8),
                           pixels.reshape(height, width * 3)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (PNG_SIGNATURE + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows.tobytes(), PNG_COMPRESSION))
            + _chunk(b"IEND", b""))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data)))
