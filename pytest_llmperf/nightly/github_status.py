"""Episodes as a GitHub commit status on the commit the night measured (nightly/senders.py's
`github` channel), where the token is at hand: GITHUB_TOKEN (statuses: write), GITHUB_REPOSITORY
and GITHUB_SHA, as a GitHub Actions job has them; GITHUB_API_URL for GitHub Enterprise.

One POST to /repos/{owner}/{repo}/statuses/{sha}
(https://docs.github.com/en/rest/commits/statuses#create-a-commit-status) with the context
`pytest-llmperf`: "failure" for an opened or stale episode (and a summary that counts failed
tests), "success" for a resolved one. A refused token, an unknown repository or an API out of
reach is one line naming the repository and the fix; the message stays in the outbox. The token
is never in a line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import httpx

__all__ = ["CONTEXT", "ENV_TOKEN", "sender", "state"]

ENV_TOKEN, ENV_REPO, ENV_SHA, ENV_API = ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_SHA",
                                         "GITHUB_API_URL")
CONTEXT = "pytest-llmperf"
TIMEOUT_S = 10.0
DESCRIPTION_CHARS = 140  # GitHub shows a status's description on one line


def state(event: str, text: str) -> str:
    if event == "resolved":
        return "success"
    if event == "summary":
        return "failure" if re.search(r"\b\d+ failed\b", text) else "success"
    return "failure"


def _post(environ: Mapping[str, str], event: str, text: str) -> str | None:
    repo, sha = environ[ENV_REPO], environ[ENV_SHA]
    api = (environ.get(ENV_API) or "https://api.github.com").rstrip("/")
    where = f"GitHub's commit status for {repo}@{sha[:12]}"
    body = {"state": state(event, text), "context": CONTEXT,
            "description": (text.splitlines() or [""])[0][:DESCRIPTION_CHARS]}
    headers = {"Authorization": f"Bearer {environ[ENV_TOKEN]}",
               "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    try:
        response = httpx.post(f"{api}/repos/{repo}/statuses/{sha}", json=body, headers=headers,
                              timeout=TIMEOUT_S)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return f"{where}: {api} could not be reached ({type(exc).__name__})"
    if response.status_code in (401, 403):
        return (f"{where}: the token was refused (HTTP {response.status_code}); give "
                f"${ENV_TOKEN} a token with statuses: write on {repo}")
    if response.status_code >= 300:
        return f"{where}: HTTP {response.status_code}; check ${ENV_REPO} and ${ENV_SHA}"
    return None


def sender(environ: Mapping[str, str]):
    """The `github` channel's sender where token, repository and commit are all set."""
    if not all(environ.get(name) for name in (ENV_TOKEN, ENV_REPO, ENV_SHA)):
        return None
    return lambda event, text: _post(environ, event, text)
