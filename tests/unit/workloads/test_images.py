"""Images (workloads/images.py, engines/image_input.py): what a request sends (its chat messages
with seeded noise PNGs of the asked size), that the images are what the seed draws, each bad
input's one line, and the line for images sent to a text-only model."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

from pytest_llmperf import Engine, Workload
from pytest_llmperf.engines.image_input import check_images, takes_images
from pytest_llmperf.errors import InputError
from pytest_llmperf.workloads.images import noise_png
from pytest_llmperf.workloads.prompts import load_tokenizer
from tests.conftest import REPO
from tests.unit.canned_server import client

MODELS = REPO / "suites" / "models"
TEXT_ONLY = str(MODELS / "tiny-llama")
VISION = str(MODELS / "tiny-llava")
PREFIX = "data:image/png;base64,"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(MODELS / "tiny-llava")


def workload(**options):
    fields = {"images_per_request": 2, "width": 5, "height": 3, "input_tokens": 6,
              "output_tokens": 4, "num_requests": 3, "concurrency": 1, **options}
    return Workload.images(**fields)


def decoded(url: str) -> tuple[int, int, np.ndarray]:
    """(width, height, pixels) of a PNG data URL as noise_png writes it (8-bit RGB, unfiltered
    scanlines), read with the standard library."""
    assert url.startswith(PREFIX)
    png = base64.b64decode(url.removeprefix(PREFIX))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(png):
        (size,) = struct.unpack(">I", png[at:at + 4])
        kind, data = png[at + 4:at + 8], png[at + 8:at + 8 + size]
        assert struct.unpack(">I", png[at + 8 + size:at + 12 + size])[0] == zlib.crc32(kind + data)
        chunks[kind] = data
        at += 12 + size
    width, height, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, colour) == (8, 2)
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), dtype=np.uint8).reshape(height, -1)
    assert not rows[:, 0].any()  # every scanline's filter: none
    return width, height, rows[:, 1:].reshape(height, width, 3)


def test_a_request_sends_its_images_then_its_text_as_one_user_message(tokenizer):
    requests, _ = workload().build(tokenizer)
    body = client("chat").body(requests[0])
    [message] = body["messages"]
    assert message["role"] == "user"
    assert [part["type"] for part in message["content"]] == ["image_url", "image_url", "text"]
    assert message["content"][2]["text"] == requests[0].prompt
    assert len(tokenizer.encode(requests[0].prompt)) == 6
    # The length is forced as for any request; the images do not change it.
    assert (body["max_tokens"], body["min_tokens"], body["ignore_eos"]) == (4, 4, True)


def test_each_image_is_a_png_of_the_asked_size_drawn_from_the_seed(tokenizer):
    requests, _ = workload().build(tokenizer)
    urls = [part["image_url"]["url"] for request in requests
            for part in dict(request.body)["messages"][0]["content"] if part["type"] != "text"]
    assert len(urls) == 6 and len(set(urls)) == 6  # 3 requests x 2 images, none repeated
    images = [decoded(url) for url in urls]
    assert {(w, h) for w, h, _ in images} == {(5, 3)}
    again = np.random.default_rng(1)
    assert np.array_equal(decoded(PREFIX + base64.b64encode(noise_png(again, 5, 3)).decode())[2],
                          np.random.default_rng(1).integers(0, 256, (3, 5, 3), dtype=np.uint8))


def test_the_same_seed_sends_the_same_requests_and_another_seed_other_images(tokenizer):
    first = workload().build(tokenizer)[0]
    assert workload().build(tokenizer)[0] == first
    other = workload(seed=7).build(tokenizer)[0]
    assert dict(other[0].body)["messages"] != dict(first[0].body)["messages"]


def test_the_workload_is_a_chat_one_and_its_identity_holds_the_images():
    found = workload()
    assert (found.name, found.api) == ("images-2x5x3-6in-4out", "chat")
    assert found.to_dict()["source"] == {"type": "ImagesSource", "images_per_request": 2,
                                         "width": 5, "height": 3, "input_tokens": 6,
                                         "output_tokens": 4}


@pytest.mark.parametrize("options, line", [
    ({"width": 0}, "Workload.images: an image must be at least 1x1 pixels, got width 0 x height "
                   "3; give width= and height= of 1 or more"),
    ({"height": -2}, "Workload.images: an image must be at least 1x1 pixels, got width 5 x "
                     "height -2; give width= and height= of 1 or more"),
    ({"images_per_request": 0}, "Workload.images: images_per_request must be >= 1, got 0; for "
                                "requests without images use Workload.fixed(..., api='chat')"),
    ({"input_tokens": 0}, "Workload.images: input_tokens and output_tokens must be >= 1, got 0 "
                          "and 4"),
    ({"api": "completions"}, "Workload.images: images need /v1/chat/completions, got "
                             "api='completions'; leave api at 'chat', its default here"),
])
def test_a_bad_input_is_one_line_where_the_workload_is_written(options, line):
    with pytest.raises(InputError) as caught:
        workload(**options)
    assert str(caught.value) == line


def test_images_for_a_text_only_model_are_one_line_before_it_starts():
    with pytest.raises(InputError) as caught:
        check_images(Engine(model=TEXT_ONLY), "images-1x64x64-32in-8out", 1)
    assert str(caught.value) == (
        f"Workload 'images-1x64x64-32in-8out' sends 1 image(s) a request, but engine model "
        f"{TEXT_ONLY} is not a vision-language model (its config.json has no vision_config and "
        "it ships no preprocessor_config.json): give the test a model that takes images "
        "(suites/models/tiny-llava, made by scripts/make_tiny_llava_model.py), or send text "
        "only with Workload.fixed(..., api='chat')")


def test_a_vision_model_an_unknown_one_and_a_workload_without_images_pass(tmp_path):
    check_images(Engine(model=VISION), "images", 2)
    check_images(Engine(model=TEXT_ONLY), "fixed", 0)
    check_images(Engine(model=TEXT_ONLY, kind="sglang"), "images", 1)  # vLLM's files only
    check_images(Engine(model="llava-hf/llava-1.5-7b-hf"), "images", 1)  # a Hub id: unknown


def test_a_model_takes_images_by_its_vision_config_or_its_image_processor(tmp_path):
    assert takes_images(VISION) is True
    assert takes_images(TEXT_ONLY) is False
    (tmp_path / "config.json").write_text(json.dumps({"vision_config": {}}))
    assert takes_images(str(tmp_path)) is True
    processor_only = tmp_path / "processor"
    processor_only.mkdir()
    (processor_only / "preprocessor_config.json").write_text("{}")
    assert takes_images(str(processor_only)) is True
    assert takes_images(str(tmp_path / "empty")) is None  # no config.json: not known


def test_the_committed_model_is_the_scripts_output(tmp_path):
    """suites/models/tiny-llava is what scripts/make_tiny_llava_model.py writes, file for file,
    and its image token is the tokenizer's special token the config names."""
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "make_tiny_llava_model.py"),
                           "--out", str(tmp_path)], capture_output=True, text=True, check=True)
    committed = MODELS / "tiny-llava"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in
                                                                committed.iterdir())
    assert all((tmp_path / p.name).read_bytes() == p.read_bytes() for p in committed.iterdir())
    assert done.stdout == (f"wrote {tmp_path}: Llava, CLIP 64x64/8 (64 tokens an image), "
                           "<image> = 4096\n")
    config = json.loads((committed / "config.json").read_text())
    assert (config["image_token_index"], config["text_config"]["vocab_size"]) == (4096, 4097)
