"""The failures of a night, posted to a webhook (`LLMPERF_WEBHOOK_URL`) as Slack-compatible JSON:
`{"text": "..."}`, what Slack's incoming webhooks take
(https://api.slack.com/messaging/webhooks) and Mattermost's and Rocket.Chat's accept too.

A webhook is a messenger, not a judge: one that refuses (an HTTP error status) or never answers
costs one line on stderr, never the night's verdict or exit status. Its URL is a secret (a Slack
webhook's path is its key), so a line names only its host.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx

__all__ = ["ENV", "TIMEOUT_S", "payload", "post", "sender"]

ENV = "LLMPERF_WEBHOOK_URL"
# Short: a chat server answers in well under a second, and a night's job must not hang on one.
TIMEOUT_S = 10.0


def payload(text: str) -> dict[str, str]:
    return {"text": text}


def post(url: str, text: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """Post `text`; None when the webhook took it, else the one line that says why not."""
    host = urlsplit(url).hostname or "?"
    where = f"the webhook (${ENV}, host {host})"
    try:
        response = httpx.post(url, json=payload(text), timeout=timeout_s)
    except httpx.TimeoutException:
        return f"{where} did not answer within {timeout_s:g} s; the failures are in the reports"
    except (httpx.HTTPError, httpx.InvalidURL) as exc:  # refused, unknown host, a bad URL
        return (f"{where} could not be reached ({type(exc).__name__}); the failures are in "
                "the reports")
    if response.status_code >= 300:
        return (f"{where} answered HTTP {response.status_code}; the failures are in the "
                "reports")
    return None


def sender(environ: Mapping[str, str]):
    """The episodes' `webhook` channel (nightly/senders.py) where $LLMPERF_WEBHOOK_URL is set."""
    url = environ.get(ENV)
    return (lambda event, text: post(url, text)) if url else None
