"""The episodes' channels (nightly/senders.py): mail received by a real SMTP server on
127.0.0.1 (aiosmtpd), a commit status posted to a local receiver standing for GitHub's API;
a malformed address, a refused token and an unreachable server are one line each, and the
message stays in the store's outbox until a later run delivers it, once."""

from __future__ import annotations

import socket
from datetime import datetime, timezone
from email import message_from_bytes

import pytest

from pytest_llmperf.history import episode_book as book
from pytest_llmperf.history import location
from pytest_llmperf.history.episodes import Step
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.nightly import email_sender, github_status, senders
from tests.webhook_receiver import Receiver

NOW = datetime(2026, 11, 5, 4, tzinfo=timezone.utc)
TEXT = "opened: suites/test_cpu.py::test_a tpot_s.p50 +25.5% since run 4\nmore"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Mailbox:
    def __init__(self) -> None:
        self.mails = []

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd's handler hook
        self.mails.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
        return "250 OK"


@pytest.fixture
def smtp():
    controller_mod = pytest.importorskip("aiosmtpd.controller")
    box = Mailbox()
    controller = controller_mod.Controller(box, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield box, f"smtp://127.0.0.1:{controller.port}"
    controller.stop()


def test_mail_is_received_with_the_first_line_as_subject(smtp):
    box, url = smtp
    send = email_sender.sender({"LLMPERF_EMAIL_TO": "perf@example.com, lead@example.org",
                                "LLMPERF_SMTP_URL": url, "LLMPERF_EMAIL_FROM": "ci@example.com"})
    assert send("opened", TEXT) is None
    ((to, mail),) = box.mails
    assert to == ["perf@example.com", "lead@example.org"]
    assert (mail["Subject"], mail["From"]) == (TEXT.splitlines()[0], "ci@example.com")
    assert mail.get_payload().replace("\r\n", "\n").strip() == TEXT


@pytest.mark.parametrize(("to", "line"), [
    ("perf-team", "LLMPERF_EMAIL_TO: 'perf-team' is not an email address (give "
                  "name@example.com, several separated by commas)"),
    ("a@example.com, b@local", "LLMPERF_EMAIL_TO: 'b@local' is not an email address (give "
                               "name@example.com, several separated by commas)"),
])
def test_a_malformed_address_is_one_line_and_sends_nothing(smtp, to, line):
    box, url = smtp
    send = email_sender.sender({"LLMPERF_EMAIL_TO": to, "LLMPERF_SMTP_URL": url})
    assert send("opened", TEXT) == line
    assert box.mails == []


def test_an_unreachable_mail_server_is_one_line():
    port = free_port()
    send = email_sender.sender({"LLMPERF_EMAIL_TO": "perf@example.com",
                                "LLMPERF_SMTP_URL": f"smtp://127.0.0.1:{port}"})
    assert send("opened", TEXT) == (f"the mail server (LLMPERF_SMTP_URL, 127.0.0.1:{port}) "
                                    "could not be reached (Connection refused)")


def github(url: str, token: str = "t0ken") -> dict[str, str]:
    return {"GITHUB_TOKEN": token, "GITHUB_REPOSITORY": "team/llm",
            "GITHUB_SHA": "a1b2c3d4e5f6a7b8c9d0", "GITHUB_API_URL": url}


def test_a_commit_status_is_posted_with_the_token(monkeypatch):
    with Receiver(status=201) as api:
        base = api.url.split("/services")[0]
        assert github_status.sender(github(base))("opened", TEXT) is None
        assert github_status.sender(github(base))("resolved", "resolved (passed): x") is None
    (path, headers), _ = api.requests
    assert path == "/repos/team/llm/statuses/a1b2c3d4e5f6a7b8c9d0"
    assert headers["Authorization"] == "Bearer t0ken"
    assert [body for _, body in api.bodies] == [
        {"state": "failure", "context": "pytest-llmperf", "description": TEXT.splitlines()[0]},
        {"state": "success", "context": "pytest-llmperf", "description": "resolved (passed): x"}]


def test_a_refused_token_keeps_the_message_for_the_next_run_and_it_goes_once(tmp_path):
    store = HistoryStore.open(location.resolve(str(tmp_path / "h.sqlite"), tmp_path))
    try:
        book.record_step(store, Step(), ["github"], NOW, summary="llmperf nightly -m cpu: "
                                                                     "1 failed, 1 passed")
        with Receiver(status=401) as api:
            base = api.url.split("/services")[0]
            assert book.deliver(store, senders.configured(github(base, "bad")), NOW) == [
                "GitHub's commit status for team/llm@a1b2c3d4e5f6: the token was refused (HTTP "
                "401); give $GITHUB_TOKEN a token with statuses: write on team/llm (kept in the "
                "store's outbox for the next run)"]
            api.status = 201
            for _ in range(2):
                assert book.deliver(store, senders.configured(github(base)), NOW) == []
        assert [body["state"] for _, body in api.bodies] == ["failure", "failure"]
        assert "bad" not in str(book.deliver(store, senders.configured(github(base)), NOW))
    finally:
        store.close()


def test_only_configured_channels_are_senders():
    assert senders.configured({}) == {}
    assert set(senders.configured({"LLMPERF_WEBHOOK_URL": "http://x", **github("http://y"),
                                   "LLMPERF_EMAIL_TO": "a@example.com"})) == {
        "webhook", "email", "github"}
