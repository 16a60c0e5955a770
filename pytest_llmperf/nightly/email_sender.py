"""Episodes by email over SMTP (nightly/senders.py's `email` channel).

    LLMPERF_EMAIL_TO=perf-team@example.com[,another@example.com]
    LLMPERF_SMTP_URL=smtp://mail.example.com:25   (smtps:// for TLS from the start; default
                                                    smtp://localhost:25)
    LLMPERF_SMTP_USER, LLMPERF_SMTP_PASSWORD        where the server wants a login
    LLMPERF_EMAIL_FROM                              default pytest-llmperf@<this host>

The first line of a message is its subject, the whole message its body. A malformed address,
an unreachable server or one that refuses is one line; the message stays in the outbox.
"""

from __future__ import annotations

import platform
import smtplib
from collections.abc import Mapping
from email.message import EmailMessage
from email.utils import parseaddr
from urllib.parse import urlsplit

__all__ = ["ENV_TO", "ENV_URL", "addresses", "sender"]

ENV_TO, ENV_URL, ENV_FROM = "LLMPERF_EMAIL_TO", "LLMPERF_SMTP_URL", "LLMPERF_EMAIL_FROM"
ENV_USER, ENV_PASSWORD = "LLMPERF_SMTP_USER", "LLMPERF_SMTP_PASSWORD"
TIMEOUT_S = 10.0
SUBJECT_CHARS = 120


def addresses(text: str) -> list[str] | str:
    """The addresses of a comma-separated list, or the line that says which one is malformed."""
    found = [part.strip() for part in text.split(",") if part.strip()]
    for address in found:
        _, parsed = parseaddr(address)
        user, at, host = parsed.partition("@")
        if not (user and at and "." in host) or parsed != address:
            return (f"{ENV_TO}: {address!r} is not an email address (give name@example.com, "
                    "several separated by commas)")
    return found or f"{ENV_TO} is empty; give name@example.com"


def _message(sender_address: str, to: list[str], text: str) -> EmailMessage:
    message = EmailMessage()
    first = (text.splitlines() or ["pytest-llmperf"])[0]
    message["Subject"] = first[:SUBJECT_CHARS]
    message["From"], message["To"] = sender_address, ", ".join(to)
    message.set_content(text)
    return message


def _send(environ: Mapping[str, str], to: list[str], text: str) -> str | None:
    url = urlsplit(environ.get(ENV_URL) or "smtp://localhost:25")
    host, secure = url.hostname or "localhost", url.scheme == "smtps"
    port = url.port or (465 if secure else 25)
    where = f"the mail server ({ENV_URL}, {host}:{port})"
    client = smtplib.SMTP_SSL if secure else smtplib.SMTP
    from_ = environ.get(ENV_FROM) or f"pytest-llmperf@{platform.node() or 'localhost'}"
    try:
        with client(host, port, timeout=TIMEOUT_S) as smtp:
            if environ.get(ENV_USER):
                smtp.login(environ[ENV_USER], environ.get(ENV_PASSWORD, ""))
            smtp.send_message(_message(from_, to, text))
    except smtplib.SMTPException as exc:
        said = getattr(exc, "smtp_error", b"") or str(exc).encode()
        first = (said.decode(errors="replace").splitlines() or [type(exc).__name__])[0]
        return f"{where} refused the mail ({first})"
    except OSError as exc:
        return f"{where} could not be reached ({exc.strerror or type(exc).__name__})"
    return None


def sender(environ: Mapping[str, str]):
    """The `email` channel's sender where LLMPERF_EMAIL_TO is set, else None."""
    if not environ.get(ENV_TO):
        return None

    def send(event: str, text: str) -> str | None:
        to = addresses(environ[ENV_TO])
        return to if isinstance(to, str) else _send(environ, to, text)

    return send
