"""How a deployment is reached (client/access.py, session/deployment.py): the forms of its URL,
the headers every request carries and which of them are secrets, where the API key comes from,
and the one-line refusals of settings that cannot work. The servers themselves are in
tests/plugin/test_deployment_plugin.py."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from pytest_llmperf.client.access import Access, parse_headers, split_url
from pytest_llmperf.client.http1 import ConnectionPool
from pytest_llmperf.plugin import configs
from pytest_llmperf.secrets import MARKER
from pytest_llmperf.session.deployment import Deployment
from pytest_llmperf.session.settings import resolve


@pytest.mark.parametrize("text", ["http://h:8000", "http://h:8000/", "http://h:8000/v1",
                                  "http://h:8000/v1/", " http://h:8000/v1 "])
def test_a_base_url_with_or_without_v1_is_the_server_root(text):
    assert split_url(text) == ("http://h:8000", None)


def test_a_gateways_prefix_stays():
    assert split_url("https://gw.example.com/llm/v1/") == ("https://gw.example.com/llm", None)


def test_user_and_password_leave_the_url():
    assert split_url("http://perf:p%40ss@h:8000/v1") == ("http://h:8000", ("perf", "p@ss"))


@pytest.mark.parametrize("text, line", [
    ("h:8000", "--llmperf-endpoint 'h:8000' is not an http(s)://host[:port][/path] URL; give the "
               "server's base URL, e.g. http://127.0.0.1:8000"),
    ("http://u:hunter2@h:port", f"--llmperf-endpoint 'http://u:{MARKER}@h:port' has a port that "
                                "is not a number; give the server's base URL, e.g. "
                                "http://127.0.0.1:8000"),
    ("http://h:8000/v1?x=1", "--llmperf-endpoint 'http://h:8000/v1?x=1' has a query or fragment; "
                             "give the server's base URL without them"),
])
def test_a_url_that_is_no_base_url_is_one_line_without_its_password(text, line):
    with pytest.raises(ValueError) as raised:
        split_url(text)
    assert str(raised.value) == line


def test_the_request_head_carries_the_headers_and_a_host_without_credentials():
    access = Access((("Authorization", "Bearer k"), ("X-Team", "perf")))
    pool = ConnectionPool("http://u:p@h:8000/llm", clock=lambda: 0.0, connect_timeout_s=1,
                          headers=access.header_lines())
    assert pool.request_bytes("/v1/completions", b"{}") == (
        b"POST /llm/v1/completions HTTP/1.1\r\nHost: h:8000\r\nContent-Type: application/json\r\n"
        b"Accept: text/event-stream\r\nAuthorization: Bearer k\r\nX-Team: perf\r\n"
        b"Content-Length: 2\r\n\r\n{}")


def test_headers_parse_one_a_line():
    assert parse_headers("X-Team: perf\n\n  X-Api-Key:  k: v  \n") == (
        ("X-Team", "perf"), ("X-Api-Key", "k: v"))


@pytest.mark.parametrize("text, line", [
    ("Bearer abc", "expected 'Name: value' (a header name, a colon, its value)"),
    ("Bad Name: x", "expected 'Name: value' (a header name, a colon, its value)"),
    ("Host: elsewhere", "the client writes the Host header itself; drop it"),
    ("X-Team: pérf", "the value of header X-Team is not printable ASCII; HTTP/1.1 headers need it"),
])
def test_a_bad_header_is_one_line(text, line):
    with pytest.raises(ValueError) as raised:
        parse_headers(text)
    assert str(raised.value) == line


def test_credentials_and_secret_looking_headers_are_redacted_others_not():
    basic = base64.b64encode(b"perf:pw-123").decode()
    access = Access((("Authorization", "Bearer sk-1"), ("X-Gateway-Token", "gw-2"),
                     ("Proxy-Authorization", f"Basic {basic}"), ("X-Team", "perf")))
    text = f"echo: Bearer sk-1 sk-1 gw-2 {basic} perf:pw-123 pw-123 perf"
    assert access.redact(text) == f"echo: {MARKER} {MARKER} {MARKER} {MARKER} {MARKER} {MARKER} perf"


def test_nothing_in_an_endpoints_repr_is_a_secret():
    from pytest_llmperf.client.measurement import Endpoint

    endpoint = Endpoint("http://h", "m", access=Access((("Authorization", "Bearer sk-1"),)))
    assert "sk-1" not in repr(endpoint)
    assert "sk-1" not in repr(settings(cli={"api_key": "sk-1", "endpoint": "http://h"}))


# ------------------------------------------------------------------ settings -> Deployment

def settings(cli=None, ini=None, env=None, rootdir=Path(".")):
    cli, ini = cli or {}, ini or {}
    return resolve(lambda name: cli.get(name), lambda key: ini.get(key), env or {},
                   rootdir=rootdir)


def deployment(cli=None, ini=None, env=None, rootdir=Path(".")) -> Deployment:
    return Deployment.of(configs.endpoint_config(settings(cli, ini, env, rootdir)), env or {})


def authorization(found: Deployment) -> str | None:
    return dict(found.access.headers).get("Authorization")


def test_the_key_flag_beats_its_env_beats_its_ini_beats_openai_api_key():
    url = {"endpoint": "http://h:8000"}
    every = {"LLMPERF_API_KEY": "env", "OPENAI_API_KEY": "openai"}
    assert authorization(deployment({**url, "api_key": "cli"}, {"llmperf_api_key": "ini"},
                                    every)) == "Bearer cli"
    assert authorization(deployment(url, {"llmperf_api_key": "ini"}, every)) == "Bearer env"
    assert authorization(deployment(url, {"llmperf_api_key": "ini"},
                                    {"OPENAI_API_KEY": "openai"})) == "Bearer ini"
    assert authorization(deployment(url, env={"OPENAI_API_KEY": "openai"})) == "Bearer openai"
    assert authorization(deployment(url)) is None


def test_headers_from_repeated_flags_then_env_lines_then_ini_lines():
    url = {"endpoint": "http://h:8000"}
    cli = {**url, "header": [(("A", "1"),), (("B", "2"),)]}  # as argparse's append gives them
    assert deployment(cli).access.headers == (("A", "1"), ("B", "2"))
    assert deployment(url, {"llmperf_header": "C: 3\nD: 4"}, {"LLMPERF_HEADER": "E: 5"}
                      ).access.headers == (("E", "5"),)
    assert deployment(url, {"llmperf_header": "C: 3\nD: 4"}).access.headers == (
        ("C", "3"), ("D", "4"))


def test_the_urls_user_and_password_are_basic_auth_and_outrank_openai_api_key():
    found = deployment({"endpoint": "http://perf:pw@h:8000/v1"}, env={"OPENAI_API_KEY": "o"})
    assert found.url == "http://h:8000"
    assert authorization(found) == "Basic " + base64.b64encode(b"perf:pw").decode()


@pytest.mark.parametrize("cli, line", [
    ({"endpoint": "http://u:p@h", "api_key": "k"},
     "--llmperf-api-key and the URL's user:password@ each set the Authorization header: give one "
     "of them"),
    ({"endpoint": "http://h", "api_key": "k", "header": [(("Authorization", "Basic x"),)]},
     "--llmperf-api-key and --llmperf-header Authorization each set the Authorization header: "
     "give one of them"),
    ({"endpoint": "http://h", "insecure": True},
     "--llmperf-insecure is for https:// endpoints and --llmperf-endpoint http://h is plain "
     "http: drop --llmperf-insecure or give the https:// URL"),
    ({"endpoint": "https://h", "insecure": True, "ca_bundle": Path("ca.pem")},
     "--llmperf-insecure turns the certificate check off and --llmperf-ca-bundle says whom it "
     "trusts: give one of them"),
])
def test_settings_that_cannot_reach_the_server_are_one_line(cli, line):
    with pytest.raises(ValueError) as raised:
        deployment(cli)
    assert str(raised.value) == line


def test_a_ca_bundle_is_relative_to_the_rootdir_and_must_be_pem(tmp_path):
    with pytest.raises(ValueError) as raised:
        deployment({"endpoint": "https://h", "ca_bundle": Path("ca.pem")}, rootdir=tmp_path)
    assert str(raised.value) == (f"--llmperf-ca-bundle {tmp_path / 'ca.pem'}: no such file; give "
                                 "the PEM file of the CA that signed the server's certificate")
    (tmp_path / "ca.pem").write_text("not a certificate\n")
    with pytest.raises(ValueError) as raised:
        deployment({"endpoint": "https://h", "ca_bundle": Path("ca.pem")}, rootdir=tmp_path)
    assert str(raised.value).startswith(f"--llmperf-ca-bundle {tmp_path / 'ca.pem'}: not PEM CA "
                                        "certificates (")


def test_a_bad_key_or_header_from_env_or_ini_is_named_but_never_repeated():
    with pytest.raises(ValueError) as raised:
        settings(env={"LLMPERF_API_KEY": "two words"})
    assert str(raised.value) == ("$LLMPERF_API_KEY: expected one key of printable ASCII without "
                                 "spaces")
    with pytest.raises(ValueError) as raised:
        settings(ini={"llmperf_header": "Bearer sk-secret"})
    assert str(raised.value) == ("ini llmperf_header: expected 'Name: value' (a header name, a "
                                 "colon, its value)")


def test_the_served_name_override_replaces_every_engines_name():
    from pytest_llmperf import Engine

    found = deployment({"endpoint": "http://h", "model": "served"})
    assert found.model_name(Engine(model="/models/llama", served_model_name="llama")) == "served"
    assert deployment({"endpoint": "http://h"}).model_name(
        Engine(model="/models/llama", served_model_name="llama")) == "llama"


def test_one_lock_file_per_server_however_its_url_is_written(tmp_path):
    first = deployment({"endpoint": "http://127.0.0.1:8000/v1/"}).lock(tmp_path)
    second = deployment({"endpoint": "http://u:p@127.0.0.1:8000"}).lock(tmp_path)
    assert first.lock_file == second.lock_file
    assert Path(first.lock_file).parent == tmp_path / ".llmperf" / "locks"
    assert Path(first.lock_file).name.startswith("endpoint-127.0.0.1-8000-")
