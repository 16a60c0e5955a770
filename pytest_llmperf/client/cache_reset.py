"""Empty the server's prefix cache before a measurement that asks for a cold one
(`Workload(prefix_cache="cold")`).

vLLM's OpenAI server empties it on `POST /reset_prefix_cache` and answers {"success": bool}; it
answers false while blocks are still held (requests running, KV offload in flight), and callers
may retry (vllm/entrypoints/serve/dev/cache/api_router.py). The route exists only in dev mode,
`VLLM_SERVER_DEV_MODE=1` (vllm/entrypoints/launchers/api_server/routers.py), which the engines the
plugin starts have (engines/kinds/vllm.py); a server without it answers 404, and the test fails
with one line naming the fix, before anything is measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from pytest_llmperf.client.access import Access
from pytest_llmperf.errors import InputError

__all__ = ["RESET_PATH", "reset_prefix_cache"]

RESET_PATH = "/reset_prefix_cache"
# The warm-up's last blocks are freed as its requests finish: a refusal right after it is
# retried for this long before the test fails.
RETRY_FOR_S = 10.0
RETRY_EVERY_S = 0.1


def reset_prefix_cache(base_url: str, access: Access | None = None, *,
                       post: Callable[..., httpx.Response] = httpx.post,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep) -> None:
    """Empty the prefix cache of the server at `base_url`, or raise InputError saying why not."""
    access = access or Access()
    url = base_url.rstrip("/") + RESET_PATH
    headers, verify = dict(access.headers), access.ssl_context()
    deadline = clock() + RETRY_FOR_S
    while True:
        response = post(url, headers=headers, verify=verify, timeout=RETRY_FOR_S)
        if response.status_code in (404, 405):
            raise InputError(not_offered(base_url, response.status_code))
        if response.status_code != 200:
            raise InputError(f"prefix_cache='cold': POST {RESET_PATH} on {base_url} answered "
                             f"HTTP {response.status_code}: {response.text[:200]}")
        if _succeeded(response):
            return
        if clock() >= deadline:
            raise InputError(f"prefix_cache='cold': {base_url} refused to reset its prefix "
                             f"cache for {RETRY_FOR_S:g} s (it answers success=false while "
                             "blocks are held: is another load running on it?)")
        sleep(RETRY_EVERY_S)


def not_offered(base_url: str, status: int) -> str:
    return (f"prefix_cache='cold' needs POST {RESET_PATH}, and {base_url} does not offer it "
            f"(HTTP {status}): vLLM serves it only in dev mode; start the server with "
            "VLLM_SERVER_DEV_MODE=1 (engines the plugin starts have it), or leave prefix_cache "
            "at 'warm'")


def _succeeded(response: httpx.Response) -> bool:
    try:
        answer = response.json()
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("success") is True
