"""Push a night's text exposition (prometheus.py) to a Prometheus Pushgateway.

One PUT to /metrics/job/llmperf/shape@base64/<shape>/host@base64/<host> (the grouping key:
https://github.com/prometheus/pushgateway#url): it replaces that runner shape and host's group,
so the gateway holds each host's newest night, and Prometheus scrapes it from the gateway's
/metrics. Label values go base64url-encoded, so a slash or a space in one is kept.
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.request

from pytest_llmperf.errors import InputError

__all__ = ["CONTENT_TYPE", "JOB", "PushError", "group_url", "push"]

JOB = "llmperf"
CONTENT_TYPE = "text/plain; version=0.0.4"
TIMEOUT_S = 30.0


class PushError(InputError):
    """The gateway cannot take the night; the message is one line naming it and the fix."""


def group_url(gateway: str, labels: dict[str, str]) -> str:
    """The gateway's URL of the group `labels` (job llmperf)."""
    path = [f"/metrics/job/{JOB}"]
    for name, value in labels.items():
        encoded = base64.urlsafe_b64encode(value.encode()).decode()
        path.append(f"/{name}@base64/{encoded}")
    return gateway.rstrip("/") + "".join(path)


def push(gateway: str, labels: dict[str, str], body: str) -> str:
    """PUT `body` to the group; returns the group's URL. PushError (one line naming the gateway
    and the fix) where it is unreachable or refuses the push."""
    if not gateway.startswith(("http://", "https://")):
        raise PushError(f"--push {gateway!r}: give the Pushgateway's URL, e.g. "
                       "http://pushgateway:9091")
    url = group_url(gateway, labels)
    request = urllib.request.Request(url, data=body.encode(), method="PUT",
                                     headers={"Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S):
            return url
    except urllib.error.HTTPError as exc:
        said = exc.read().decode(errors="replace").strip().splitlines() or [exc.reason]
        raise PushError(f"--push {gateway}: the Pushgateway refused the night (HTTP "
                       f"{exc.code}: {said[0]})") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PushError(f"--push {gateway}: cannot reach the Pushgateway ({reason}); check the "
                       "URL and that it is running") from None
