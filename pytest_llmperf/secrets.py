"""Which engine settings are secrets, and how they are written out: as a marker, never as is.

An Engine's `env` and `extra_args` reach committed baselines, run files, reports, engine logs and
error lines; an `HF_TOKEN` or an `--api-key` there would be published by the next baseline
commit. The engine itself gets the real values (engines/server.py); everything written about it
goes through here.

The rule, on a name split into parts at `_`, `-` and `.` (case-insensitive): a name is secret
when a part is KEY, SECRET, PASSWORD, AUTH or CREDENTIAL (or their plurals), or when its last part
is TOKEN. TOKEN only counts last because vLLM uses it as a word of ordinary settings
(`--long-prefill-token-threshold`, `--return-tokens-as-token-ids`,
`VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD`) while secrets end with it (`HF_TOKEN`, `--hf-token`).
Whole parts, not substrings: `--max-num-batched-tokens`, `--tokenizer` and `VLLM_CPU_KVCACHE_SPACE`
are not secret. Names the user adds (--llmperf-secret-names) match as a run of whole parts
anywhere in a name: `PAT` hides `GITHUB_PAT`.

A recorded value is the marker whatever the secret was, so a baseline recorded with one token
still matches the same spec with another (verdict/baselines.py compares recorded engines).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MARKER", "is_secret", "parse_names", "redact_args", "redact_env", "redact_text",
           "secret_values", "use_names"]

MARKER = "<redacted>"

_ANYWHERE = frozenset({"KEY", "KEYS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "AUTH",
                       "CREDENTIAL", "CREDENTIALS"})
_LAST = frozenset({"TOKEN"})
_SEPARATORS = re.compile(r"[-_.]+")
_NAME = re.compile(r"-{0,2}[A-Za-z0-9][A-Za-z0-9_.-]*")

# The user's names for this session (--llmperf-secret-names), set once by the plugin: labels, log
# headers and error lines are written deep in engines/, which never sees the settings.
_user_names: tuple[tuple[str, ...], ...] = ()


def _parts(name: str) -> tuple[str, ...]:
    return tuple(part for part in _SEPARATORS.split(name.upper()) if part)


def use_names(names: Iterable[str]) -> None:
    """Hide these names too, for the rest of the session (the plugin calls it at configure)."""
    global _user_names
    _user_names = tuple(parts for parts in map(_parts, names) if parts)


def parse_names(text: str) -> tuple[str, ...]:
    """`MY_PAT,--license-file`: names whose values are never written out (flag or env names)."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    wrong = [name for name in names if not _NAME.fullmatch(name)]
    if wrong:
        raise ValueError(f"{wrong[0]!r} is not an environment variable or flag name; expected "
                         "names such as MY_PAT,--license-file separated by commas")
    return names


def _contains(parts: tuple[str, ...], run: tuple[str, ...]) -> bool:
    return any(parts[i:i + len(run)] == run for i in range(len(parts) - len(run) + 1))


def is_secret(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether the value of env variable or flag `name` must never be written out (the rule is
    in this module's docstring); `extra`: more names, as the user's."""
    parts = _parts(str(name))
    if not parts:
        return False
    if _ANYWHERE.intersection(parts) or parts[-1] in _LAST:
        return True
    return any(_contains(parts, run) for run in (*_user_names, *map(_parts, extra)) if run)


def _hides(name: Any, value: Any, extra: Iterable[str]) -> bool:
    """A bool is a bare flag (`--disable-auth`), never a secret: it stays readable."""
    return not isinstance(value, bool) and is_secret(name, extra)


def redact_env(mapping: Mapping[str, Any], extra: Iterable[str] = ()) -> dict[str, Any]:
    """`env` or `extra_args` as written out: the same keys, each secret value the marker
    (nested mappings, such as a JSON-config flag, likewise)."""
    extra = tuple(extra)
    return {
        key: MARKER if _hides(key, value, extra)
        else redact_env(value, extra) if isinstance(value, Mapping) else value
        for key, value in mapping.items()
    }


def secret_values(mapping: Mapping[str, Any], extra: Iterable[str] = ()) -> set[str]:
    """The values `redact_env` hides, as text, to find them again in free text."""
    extra = tuple(extra)
    found: set[str] = set()
    for key, value in mapping.items():
        if _hides(key, value, extra):
            items = value if isinstance(value, (list, tuple)) else [value]
            found.update(str(item) for item in items)
        elif isinstance(value, Mapping):
            found |= secret_values(value, extra)
    return found


def redact_args(args: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    """A command line as written out: `--api-key=abc` becomes `--api-key=<redacted>`, and every
    word after a secret flag up to the next `--flag` is the marker (vLLM's --api-key takes
    several keys)."""
    extra = tuple(extra)
    out: list[str] = []
    hiding = False
    for arg in map(str, args):
        if not arg.startswith("--"):
            out.append(MARKER if hiding else arg)
            continue
        flag, equals, _ = arg.partition("=")
        secret = is_secret(flag, extra)
        hiding = secret and not equals
        out.append(f"{flag}={MARKER}" if secret and equals else arg)
    return out


def redact_text(text: str, values: Iterable[str]) -> str:
    """`text` with each known secret value replaced by the marker (longest first, so a secret
    that holds another is hidden whole); for error lines and log lines we did not write."""
    for value in sorted({str(v) for v in values if str(v)}, key=len, reverse=True):
        text = text.replace(value, MARKER)
    return text
