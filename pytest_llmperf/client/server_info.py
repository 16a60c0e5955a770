"""Which server was measured: vLLM's `GET /version`, and how the reports name a server's identity.

The fingerprint names the client's own packages; the server may run another vLLM (an upgrade
A/B's side B, docs/ab.md; a server behind --llmperf-endpoint), so each server is asked itself.
vLLM's OpenAI server answers `GET /version` with {"version": "0.32.0"}
(vllm/entrypoints/serve/instrumentator/basic.py, from `vllm.version.__version__`). A server
without that route (another engine, a gateway) gives "unknown", never an error: the run goes on.

An identity is plain data (it crosses from pytest-xdist workers and is written to run files and
baseline provenance): {"vllm": "0.32.0", "torch": "2.13.0+cpu", "python": "3.11.7",
"source": "GET /version"}. `source` says where the vLLM version came from; torch and python come
from the engine's interpreter (engines/interpreter.py) and are absent for an endpoint.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping

import httpx

__all__ = ["UNKNOWN", "VERSION_PATH", "describe", "fetch_version", "identity", "parse_version",
           "sides_text"]

VERSION_PATH = "/version"
SOURCE = f"GET {VERSION_PATH}"
UNKNOWN = "unknown"
# Asked once per server, after /health answered: a healthy vLLM answers in milliseconds.
VERSION_TIMEOUT_S = 5.0


def fetch_version(base_url: str, headers: Mapping[str, str] | None = None,
                  timeout_s: float = VERSION_TIMEOUT_S,
                  verify: ssl.SSLContext | bool = True) -> dict[str, str]:
    """{"vllm": "0.32.0", "source": "GET /version"}, or {"vllm": "unknown", "source": why}.
    `headers` and `verify`: what every request to the server needs (an API key's Authorization,
    the TLS trust of a private CA: client/access.py)."""
    try:
        response = httpx.get(base_url.rstrip("/") + VERSION_PATH, headers=dict(headers or {}),
                             timeout=timeout_s, verify=verify)
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the run goes on without it
        return _unknown(type(exc).__name__)
    return parse_version(response.status_code, response.content)


def parse_version(status: int, body: bytes) -> dict[str, str]:
    """A /version answer as an identity's vLLM part."""
    if status != 200:
        return _unknown(f"HTTP {status}")
    try:
        answer = json.loads(body)
    except ValueError:
        return _unknown("not JSON")
    version = answer.get("version") if isinstance(answer, dict) else None
    if not isinstance(version, str) or not version.strip():
        return _unknown("no version in the answer")
    return {"vllm": version.strip(), "source": SOURCE}


def _unknown(why: str) -> dict[str, str]:
    return {"vllm": UNKNOWN, "source": f"{SOURCE}: {why}"}


def identity(answer: Mapping[str, str], installed: Mapping[str, str] | None = None
             ) -> dict[str, str]:
    """A server's identity from its /version `answer` and, for an engine we started, what its
    interpreter has installed. The server's own answer wins: it is the vLLM that runs (a
    sitecustomize or a source checkout can differ from the metadata); without one, the
    interpreter's metadata says which vLLM it imports."""
    found = {key: value for key, value in (installed or {}).items() if key != "vllm"}
    if answer.get("vllm", UNKNOWN) == UNKNOWN and (installed or {}).get("vllm"):
        return {**found, "vllm": installed["vllm"],
                "source": f"package metadata ({answer.get('source', SOURCE)})"}
    return {**found, "vllm": answer.get("vllm", UNKNOWN), "source": answer.get("source", SOURCE)}


# How the engine line names a server of another kind than vLLM's, by the spec's `kind`
# (engines/kinds/): its name and the version of its package (engines/interpreter.kind_identity).
KIND_NAMES = {"llamacpp": "llama-cpp-python", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}


def describe(server: Mapping[str, str] | None, torch: bool = False) -> str:
    """"vLLM 0.32.0" (with `torch`: ", torch 2.13.0+cpu"); "llama-cpp-python 0.3.36" for
    another kind; "server version unknown"; "" when nothing was recorded (a result made by
    hand)."""
    kind = (server or {}).get("kind")
    if kind and kind != "vllm":
        return f"{KIND_NAMES.get(kind, kind)} {server.get(kind) or UNKNOWN}"
    if not server or "vllm" not in server:
        return ""
    text = ("server version unknown" if server["vllm"] == UNKNOWN
            else f"vLLM {server['vllm']}")
    return f"{text}, torch {server['torch']}" if torch and server.get("torch") else text


def sides_text(a: Mapping[str, str] | None, b: Mapping[str, str] | None) -> str | None:
    """"A: vLLM 0.32.0 / B: vLLM 0.31.0" where the two sides of an A/B ran different software
    (torch named too where it differs); None where they ran the same, or nothing is known."""
    a, b = a or {}, b or {}
    if not (describe(a) or describe(b)):
        return None
    torch = bool(a.get("torch") and b.get("torch") and a["torch"] != b["torch"])
    if describe(a) == describe(b) and not torch:
        return None
    return f"A: {describe(a, torch) or UNKNOWN} / B: {describe(b, torch) or UNKNOWN}"
