"""The channels episodes are delivered to, by name (history/episode_book.py's outbox keeps a
message per channel): each module's `sender(environ)` gives its sender where it is configured,
else None. A sender takes (event, text) and returns None when delivered, else one line."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pytest_llmperf.history.episode_book import Sender
from pytest_llmperf.nightly import email_sender, github_status, webhook

__all__ = ["CHANNELS", "configured"]

CHANNELS: dict[str, Callable[[Mapping[str, str]], Sender | None]] = {
    "webhook": webhook.sender,
    "email": email_sender.sender,
    "github": github_status.sender,
}


def configured(environ: Mapping[str, str]) -> dict[str, Sender]:
    """The senders of the channels `environ` configures."""
    found = {name: make(environ) for name, make in CHANNELS.items()}
    return {name: send for name, send in found.items() if send is not None}
