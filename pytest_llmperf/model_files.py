"""Where a model's config.json and tokenizer files are: the directory `Engine(model=...)` names,
or, for a Hugging Face Hub id, its snapshot in huggingface_hub's cache.

vLLM takes either (`vllm serve acme/tiny-llama`), and so must everything here that reads a model's
files before or beside it: the prompt generator's tokenizer (session.tokenizer_for), the
vocabulary of a bare architecture config (workloads/vocab.py) and the roofline's config
(metrics/roofline.py). The lookup is huggingface_hub's own (`snapshot_download`), so the cache, the
revision, HF_HUB_OFFLINE and HF_TOKEN mean here what they mean to vLLM:
https://huggingface.co/docs/huggingface_hub/guides/download
The workload profiles find their dataset files in the same cache by the same lookup
(`cached_file`, for workloads/profiles.py), never downloading.

A module of its own below every layer (like numbers.py), so that metrics/ may use it too.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from pytest_llmperf.errors import InputError

__all__ = ["SMALL_FILES", "cached_file", "fetch_command", "fetch_weights", "is_hub_id",
           "model_dir", "weight_patterns"]

# What prompt generation and the roofline read (tokenizer*.json: tokenizer.json and
# tokenizer_config.json); never the weights, which are vLLM's to fetch.
SMALL_FILES = ("config.json", "tokenizer*.json", "special_tokens_map.json",
               "generation_config.json")
_PATH_PREFIXES = ("/", "./", "../", "~")
# The weights vLLM's default loader reads of a Hub model, by load_format: the files of the first
# pattern the repository has (DefaultModelLoader._prepare_weights in
# vllm/model_executor/model_loader/default_loader.py: "auto" is Mistral's consolidated files when
# there are any, else safetensors, then PyTorch's .bin and .pt), never the original/ folder
# (LoadConfig.ignore_patterns' default). A format not here (dummy, gguf, tensorizer, ...) reads
# no Hub weights this way, and nothing is fetched for it.
_WEIGHTS = {
    "auto": ("consolidated*.safetensors", "*.safetensors", "*.bin", "*.pt"),
    "hf": ("*.safetensors", "*.bin", "*.pt"),
    "safetensors": ("*.safetensors",),
    "fastsafetensors": ("*.safetensors",),
    "mistral": ("consolidated*.safetensors",),
    "pt": ("*.pt",),
    "npcache": ("*.bin",),
}
_WEIGHTS_IGNORED = ["original/**/*"]
# What vLLM reads beside the weights: configs, the shard index, tokenizer files of every kind.
_BESIDE_WEIGHTS = ["*.json", "*.model", "*.tiktoken", "*.txt", "*.jinja"]


def is_hub_id(model: str) -> bool:
    """vLLM's rule: a path that exists (or is written as one) is a local model, anything else a
    Hub id; a name that cannot be a Hub id (three parts, say) stays a path."""
    if model.startswith(_PATH_PREFIXES) or Path(model).expanduser().exists():
        return False
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError:
        return False
    return True


def model_dir(model: str, revision: str | None = None, *, download: bool = True) -> Path:
    """The local directory holding `model`'s config.json and tokenizer files.

    A local path is returned as written (its readers name it in their messages). A Hub id is
    looked up in huggingface_hub's cache; with `download` (and HF_HUB_OFFLINE unset) its small
    files are fetched first, with huggingface_hub's progress bars, so a missing model fails its
    test here in one line rather than in vLLM's start. `download=False` is for reports, which
    must not wait on the network. InputError (one line) when there is no such model.
    """
    if not is_hub_id(model):
        return Path(model)
    from huggingface_hub.utils import LocalEntryNotFoundError

    try:
        return _snapshot(model, revision, SMALL_FILES, local_only=not download)
    except LocalEntryNotFoundError as exc:
        raise InputError(_not_cached(model, revision, exc, download)) from None
    except Exception as exc:  # the Hub answered no, or its client failed: still one line
        raise InputError(_hub_refused(model, revision, exc)) from None


def cached_file(repo_id: str, filename: str, *, repo_type: str = "model",
                revision: str | None = None) -> Path | None:
    """`filename` of Hub repository `repo_id` ("model" or "dataset") at `revision` (None: the
    `main` branch) in huggingface_hub's cache, or None when the cache does not hold it. Never
    touches the network: what the cache's refs/ name is all it reads, as huggingface_hub does
    offline."""
    from huggingface_hub.utils import LocalEntryNotFoundError

    try:
        path = _snapshot(repo_id, revision, (filename,), repo_type=repo_type, local_only=True)
    except LocalEntryNotFoundError:
        return None
    path /= filename
    return path if path.is_file() else None


def _snapshot(repo_id: str, revision: str | None, patterns: tuple[str, ...], *,
              local_only: bool, repo_type: str = "model") -> Path:
    """huggingface_hub's snapshot folder of `repo_id` with the files `patterns` match (fetched
    first unless `local_only`). LocalEntryNotFoundError when neither cached nor fetched."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, repo_type=repo_type, revision=revision,
                                      allow_patterns=list(patterns), local_files_only=local_only))
    except LocalEntryNotFoundError as exc:
        partial = getattr(exc, "snapshot_path", None)  # IncompleteSnapshotError (hub >= 1.x)
        if partial:  # cached without some file: its readers say what is missing
            return Path(partial)
        raise


def weight_patterns(load_format: str | None) -> tuple[str, ...]:
    """The patterns of the weight files vLLM would read for `load_format` (None: "auto"), in
    its order of preference; () where it reads none from the Hub ("dummy", ...)."""
    return _WEIGHTS.get(load_format or "auto", ())


def fetch_weights(model: str, revision: str | None = None,
                  load_format: str | None = None) -> list[Path]:
    """Fetch Hub model `model`'s weights (the files vLLM would read, weight_patterns) and what it
    reads beside them into huggingface_hub's cache, so that its engine finds them there; the
    weight files, in the snapshot folder. What is cached already is not fetched again; a Hub out
    of reach leaves the cache as it is (huggingface_hub then returns the cached snapshot).
    InputError (one line) when the Hub refuses, or the repository has no such weights."""
    patterns = weight_patterns(load_format)
    beside = _BESIDE_WEIGHTS
    for pattern in patterns:  # one pattern a call, as vLLM takes only the first that matches
        folder = _fetch(model, revision, [pattern, *beside])
        beside = []
        found = sorted(folder.glob(pattern))
        if found:
            return found
    raise InputError(f"{_named(model, revision)}: none of its weights ({', '.join(patterns)}) "
                     f"are in the Hugging Face cache {_cache()}, and the Hugging Face Hub did not "
                     "provide them (out of reach, or no such files): check the model id and its "
                     "load_format")


def _fetch(model: str, revision: str | None, patterns: list[str]) -> Path:
    """snapshot_download of `patterns`, its failures as one line."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import (
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        return Path(snapshot_download(model, revision=revision, allow_patterns=patterns,
                                      ignore_patterns=_WEIGHTS_IGNORED))
    except LocalEntryNotFoundError as exc:  # not cached, and the Hub out of reach
        cause = exc.__cause__ or exc
        raise InputError(f"{_named(model, revision)}: its weights are not in the Hugging Face "
                         f"cache {_cache()}, and the Hugging Face Hub could not be reached "
                         f"({_first_line(cause)}); fetch them once it can be: "
                         f"{fetch_command(model, revision, include=None)}") from None
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:  # gated ones too
        raise InputError(_hub_refused(model, revision, exc)) from None
    except Exception as exc:  # its client failed (a disk full, a broken download): one line
        raise InputError(f"{_named(model, revision)}: fetching its weights from the Hugging Face "
                         f"Hub failed ({_first_line(exc)})") from None


def fetch_command(model: str, revision: str | None = None, include: str | None = "*.json") -> str:
    """The command that puts `model`'s small files (`include`; None: all its files) into the
    cache, with the installed CLI: `hf` from huggingface_hub 0.34 on, `huggingface-cli` before."""
    import huggingface_hub

    version = tuple(int(n) for n in re.findall(r"\d+", huggingface_hub.__version__)[:2])
    cli = "hf" if version >= (0, 34) else "huggingface-cli"
    pinned = f" --revision {shlex.quote(revision)}" if revision else ""
    files = f" --include {shlex.quote(include)}" if include else ""
    return f"{cli} download {model}{pinned}{files}"


def _named(model: str, revision: str | None) -> str:
    return f"{model} (revision {revision})" if revision else model


def _cache() -> str:
    """The cache huggingface_hub searched (HF_HUB_CACHE, else HF_HOME/hub), as it reports it."""
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _not_cached(model: str, revision: str | None, exc: Exception, download: bool) -> str:
    """Not in the cache, and not fetched: offline on purpose, or the Hub out of reach."""
    where = f"{_named(model, revision)}: not in the Hugging Face cache {_cache()}"
    fetch = fetch_command(model, revision)
    if not download:
        return f"{where}; fetch its config and tokenizer with: {fetch}"
    if _offline():
        return f"{where} (HF_HUB_OFFLINE is set); fetch its config and tokenizer with: {fetch}"
    cause = exc.__cause__ or exc
    return (f"{where}, and the Hugging Face Hub could not be reached ({_first_line(cause)}); "
            f"fetch its config and tokenizer once it can be: {fetch}, or set HF_HUB_OFFLINE=1 "
            "to use the cache alone")


def _hub_refused(model: str, revision: str | None, exc: Exception) -> str:
    from huggingface_hub import get_token
    from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    token = ("HF_TOKEN is not set" if get_token() is None
             else "the token set has no access to it")  # never the token itself
    if isinstance(exc, GatedRepoError):
        return (f"{model}: a gated model on the Hugging Face Hub and {token}; accept its terms at "
                f"https://huggingface.co/{model} and set HF_TOKEN to a token of that account")
    if isinstance(exc, RepositoryNotFoundError):
        return (f"{model}: no such local directory, and no such model on the Hugging Face Hub "
                f"(or a private one, and {token})")
    if isinstance(exc, RevisionNotFoundError):
        return (f"{model}: the Hugging Face Hub has no revision {revision!r} of it (a branch, "
                "tag or commit hash)")
    return (f"{_named(model, revision)}: fetching its config and tokenizer from the Hugging Face "
            f"Hub failed ({_first_line(exc)}); fetch them with: {fetch_command(model, revision)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
