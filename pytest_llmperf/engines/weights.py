"""Weights before the clock starts: a real-weight model named by a Hugging Face Hub id is
fetched into huggingface_hub's cache (HF_HOME) before its engine's start begins, not by vLLM
inside it, under the start timeout (server.py's STARTUP_TIMEOUT_S, 900 s: a 70B model's weights
are about 140 GB). The pool's factory calls it for each spec it makes a server of
(pool.engine_factory), after the engines before it were stopped and before any of a test's
engines are launched together, so a download never overlaps a measurement either.

The fetch is huggingface_hub's own snapshot_download of the files vLLM would read
(model_files.fetch_weights), so vLLM then finds them in the same cache:
https://huggingface.co/docs/huggingface_hub/guides/download

With HF_HUB_OFFLINE set nothing is fetched, and one line says so: the engine reads the cache. A
model whose weights cannot be fetched is one line too; its engine then fails to start with
vLLM's own words. The plugin shows the lines on the terminal as they come (plugin/hooks.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from pytest_llmperf.engines.spec import Engine, is_pairs, thaw_pairs
from pytest_llmperf.errors import InputError
from pytest_llmperf.model_files import fetch_weights, is_hub_id, weight_patterns

__all__ = ["fetch_before_start"]

# The engine kinds whose server reads Hub weights the way model_files.fetch_weights fetches them.
_KINDS = ("vllm",)
# An engine given one of these reads (or fetches) its weights somewhere else than this process's
# cache: fetching them here would not spare its start the download.
_OWN_CACHE_ENV = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE")
_OWN_CACHE_ARGS = ("download_dir", "download-dir")


def fetch_before_start(engines: Iterable[Engine], done: set[tuple],
                       say: Callable[[str], None]) -> None:
    """Fetch the weights of the real-weight Hub models among `engines` (not load_format
    "dummy", not a local directory) that are not in `done`, and add them to it, saying each
    (`say`: one line a model when HF_HUB_OFFLINE is set, else one as it begins and one as it
    ends, as a download may take many minutes). Nothing for engines that read no Hub weights, or
    whose weights were fetched (or tried: its line was said) already."""
    wanted = [key for key in dict.fromkeys(
        (e.model, e.revision, e.load_format) for e in engines
        if e.kind in _KINDS and weight_patterns(e.load_format) and not _own_cache(e))
        if key not in done and is_hub_id(key[0])]
    done.update(wanted)
    for model, revision, load_format in wanted:
        _fetch_one(model, revision, load_format, say)


def _fetch_one(model: str, revision: str | None, load_format: str | None,
               say: Callable[[str], None]) -> None:
    named = f"{model} (revision {revision})" if revision else model
    if _offline():
        say(f"HF_HUB_OFFLINE is set: the weights of {named} are not fetched before its engine "
            f"starts; it reads them from the Hugging Face cache {_cache()}")
        return
    say(f"weights of {named}: fetching into the Hugging Face cache {_cache()} before its "
        "engine starts")
    began = time.monotonic()
    try:
        files = fetch_weights(model, revision, load_format)
    except InputError as exc:
        say(f"{exc} (its engine will not start)")
        return
    size_gb = sum(f.stat().st_size for f in files) / 1e9  # the blobs the snapshot links to
    say(f"weights of {named}: {len(files)} file(s), {size_gb:.1f} GB, in {files[0].parent} "
        f"({time.monotonic() - began:.0f} s)")


def _own_cache(engine: Engine) -> bool:
    """The Engine names a cache of its own (its env's HF_HOME, vLLM's --download-dir)."""
    env = thaw_pairs(engine.env) if is_pairs(engine.env) else {}
    args = thaw_pairs(engine.extra_args) if is_pairs(engine.extra_args) else {}
    return any(name in env for name in _OWN_CACHE_ENV) or any(a in args for a in _OWN_CACHE_ARGS)


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _cache() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE
