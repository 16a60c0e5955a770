"""A deployment the plugin did not start (--llmperf-endpoint): its URL, how to reach it (an API
key, headers, TLS: client/access.py), the model name to send, the kind of server it is
(client/server_kind.py), the preflight that fails the session before its first test when the
server cannot be used, and the lock that keeps two measurements (two pytest-xdist workers, two
sessions in one checkout) off the one server at once.

See docs/deployments.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from filelock import FileLock

from pytest_llmperf.client import access as access_mod
from pytest_llmperf.client import server_kind as kinds
from pytest_llmperf.client.access import Access
from pytest_llmperf.client.measurement import Endpoint
from pytest_llmperf.client.openai import ClientOptions
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.errors import InputError

__all__ = ["LOCKS_DIR", "MODELS_PATH", "Deployment", "EndpointConfig"]

# What `vllm bench serve` sends as its Bearer key (vllm/benchmarks/lib/endpoint_request_func.py,
# _get_headers); read when neither --llmperf-api-key nor its env or ini is set.
OPENAI_API_KEY = "OPENAI_API_KEY"
MODELS_PATH = "/v1/models"
PREFLIGHT_TIMEOUT_S = 10.0
LOCKS_DIR = Path(".llmperf/locks")
SET_KEY = "set LLMPERF_API_KEY or --llmperf-api-key (OPENAI_API_KEY is read when neither is set)"
# Where an Authorization header came from -> how lines name it, and the fix when it is refused.
AUTH_SOURCES = {
    "api_key": ("the API key from --llmperf-api-key ($LLMPERF_API_KEY, ini llmperf_api_key)",
                "set the right one there"),
    "openai": ("the API key from $OPENAI_API_KEY",
               "set the right one in LLMPERF_API_KEY or --llmperf-api-key"),
    "url": ("the user and password in the URL", "fix them in --llmperf-endpoint"),
    "header": ("the Authorization header from --llmperf-header", "fix it there"),
}
OPENAI_SERVER = ("give the base URL of an OpenAI-compatible server (http://host:port, with or "
                 "without /v1)")


@dataclass(frozen=True)
class EndpointConfig:
    """What the options say of --llmperf-endpoint's server (session/settings.py; the plugin
    makes it: plugin/configs.py): the URL, how to reach it, the model name and its kind."""

    endpoint: str | None = None
    api_key: str | None = field(default=None, repr=False)
    header: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    ca_bundle: Path | None = None  # resolved against the rootdir
    insecure: bool = False
    model: str | None = None
    server_kind: str = kinds.AUTO


@dataclass
class Deployment:
    url: str  # the base URL requests go under: no user:password@, no /v1; what lines show
    access: Access
    model: str | None = None  # --llmperf-model: the name sent instead of each Engine's
    auth: str | None = None  # the AUTH_SOURCES key of the Authorization header, if any
    server_kind: str = kinds.AUTO  # --llmperf-server-kind: a kinds.KINDS name, or detect it
    _served: tuple[str, ...] | None = field(default=None, repr=False)
    _owners: tuple[str, ...] = field(default=(), repr=False)  # /v1/models' owned_by values
    _kind: tuple[kinds.ServerKind, str] | None = field(default=None, repr=False)
    _lock: FileLock | None = field(default=None, repr=False)

    @classmethod
    def of(cls, config: EndpointConfig, environ: Mapping[str, str]) -> Deployment | None:
        """The deployment --llmperf-endpoint names, or None without one; ValueError (one line)
        for options that cannot reach it."""
        if not config.endpoint:
            return None
        url, credentials = access_mod.split_url(config.endpoint)
        _check_tls(config, url)
        headers = list(config.header)
        auth = _auth_header(config, credentials, headers, environ)
        if auth is not None and auth[1] is not None:
            headers.insert(0, ("Authorization", auth[1]))
        if config.ca_bundle is not None:
            _check_ca_bundle(config.ca_bundle)
        ca_bundle = config.ca_bundle and str(config.ca_bundle)
        return cls(url, Access(tuple(headers), ca_bundle, config.insecure), config.model,
                   auth and auth[0], config.server_kind)

    def model_name(self, engine: Engine) -> str:
        """The name requests carry: --llmperf-model, else the spec's served name or model."""
        return self.model or engine.model_name

    def endpoint(self, engine: Engine, options: ClientOptions) -> Endpoint:
        return Endpoint(self.url, self.model_name(engine), options, self.access)

    def kind(self) -> kinds.ServerKind:
        """What kind of server this is: --llmperf-server-kind's, else detected (asked once)."""
        if self._kind is None:
            if self.server_kind != kinds.AUTO:
                self._kind = (kinds.KINDS[self.server_kind], "--llmperf-server-kind")
            else:
                self.served_models()  # owned_by is the first clue
                self._kind = kinds.detect(self.url, self.access, self._owners)
        return self._kind[0]

    def kind_note(self) -> str | None:
        """The summary's line for a server that is not vLLM: what it is and how that was told."""
        kind, how = self._kind or (kinds.VLLM, "")
        if kind is kinds.VLLM:
            return None
        if kind is kinds.OPENAI and self.server_kind == kinds.AUTO:
            return (f"--llmperf-endpoint {self.url}: server kind {how}: only OpenAI's request "
                    "fields were sent; --llmperf-server-kind vllm, sglang or llamacpp names it")
        return f"--llmperf-endpoint {self.url} is {kind.label} ({how})"

    def notes(self) -> list[str]:
        """Lines for the summary: what the reader of the numbers must know about how they came."""
        if not self.access.insecure:
            return []
        return [f"TLS certificate checks were off for --llmperf-endpoint {self.url} "
                "(--llmperf-insecure): nothing checked which server answered"]

    # ------------------------------------------------------------------ preflight

    def preflight(self) -> None:
        """Before the first test: the server answers GET /v1/models with this access, and
        serves --llmperf-model if that is given. InputError (one line) if not."""
        self.served_models()
        if self.model:
            self.check_model(self.model, "--llmperf-model")

    def served_models(self) -> tuple[str, ...]:
        """The model ids the server lists, asked once."""
        if self._served is None:
            self._served = self._ask_models()
        return self._served

    def check_model(self, name: str, whose: str) -> None:
        """InputError unless the server serves `name` (`whose` name it is, for the line)."""
        served = self.served_models()
        if name in served:
            return
        listed = ", ".join(map(repr, served)) if served else "no model"
        raise InputError(f"--llmperf-endpoint {self.url} does not serve model {name!r} ({whose}); "
                         f"it serves {listed}: set --llmperf-model to the name it serves")

    def _ask_models(self) -> tuple[str, ...]:
        where = f"GET {self.url}{MODELS_PATH}"
        try:
            response = access_mod.get(self.url, MODELS_PATH, self.access, PREFLIGHT_TIMEOUT_S)
        except httpx.HTTPError as exc:
            raise InputError(self._unreachable(where, exc)) from None
        status = response.status_code
        if status in (401, 403):
            raise InputError(self._refused(status))
        body = self._one_line(response.text)
        if status != 200:
            raise InputError(f"--llmperf-endpoint {self.url} answered {where} with HTTP {status} "
                             f"({body}); {OPENAI_SERVER}")
        ids = _model_ids(response.content)
        self._owners = _owners(response.content)
        if ids is None:
            raise InputError(f"--llmperf-endpoint {self.url} answered {where} with no OpenAI "
                             f"model list ({body}); {OPENAI_SERVER}")
        return ids

    def _unreachable(self, where: str, exc: httpx.HTTPError) -> str:
        error = self._one_line(f"{type(exc).__name__}: {exc}" if str(exc)
                               else type(exc).__name__)
        if "CERTIFICATE_VERIFY_FAILED" in error:
            return (f"--llmperf-endpoint {self.url}: its TLS certificate is not trusted ({where}: "
                    f"{error}); give the CA that signed it with --llmperf-ca-bundle PATH, or "
                    "--llmperf-insecure to skip the check")
        return (f"cannot reach --llmperf-endpoint {self.url} ({where}: {error}); start the "
                "server or fix the URL")

    def _refused(self, status: int) -> str:
        answered = f"--llmperf-endpoint {self.url} answered GET {MODELS_PATH} with HTTP {status}"
        if self.auth is None:
            return f"{answered}: it wants an API key and none was sent; {SET_KEY}"
        what, fix = AUTH_SOURCES[self.auth]
        return f"{answered}: it refused {what}; {fix}"

    def _one_line(self, text: str, limit: int = 200) -> str:
        line = self.access.redact(" ".join(text.split()))
        return line if len(line) <= limit else line[:limit] + "..."

    # ------------------------------------------------------------------ one at a time

    def lock(self, rootdir: Path) -> FileLock:
        """The lock every measurement of this server holds, shared by every process that works
        in `rootdir` (pytest-xdist's workers, a second session): one file per base URL under
        .llmperf/locks/, so two measurements never load the one server at once."""
        if self._lock is None:
            digest = hashlib.sha256(self.url.encode()).hexdigest()[:12]
            readable = re.sub(r"[^A-Za-z0-9.]+", "-", self.url.partition("://")[2]).strip("-")
            path = rootdir / LOCKS_DIR / f"endpoint-{readable[:60]}-{digest}.lock"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = FileLock(path)
        return self._lock


def _check_tls(config: EndpointConfig, url: str) -> None:
    if config.insecure and config.ca_bundle:
        raise ValueError("--llmperf-insecure turns the certificate check off and "
                         "--llmperf-ca-bundle says whom it trusts: give one of them")
    if (config.insecure or config.ca_bundle) and not url.startswith("https:"):
        flag = "--llmperf-insecure" if config.insecure else "--llmperf-ca-bundle"
        raise ValueError(f"{flag} is for https:// endpoints and --llmperf-endpoint {url} is "
                         f"plain http: drop {flag} or give the https:// URL")


def _check_ca_bundle(path: Path) -> None:
    if not path.is_file():
        raise ValueError(f"--llmperf-ca-bundle {path}: no such file; give the PEM file of the "
                         "CA that signed the server's certificate")
    try:
        ssl.create_default_context(cafile=str(path))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"--llmperf-ca-bundle {path}: not PEM CA certificates ({exc}); give "
                         "the PEM file of the CA that signed the server's certificate") from None


def _auth_header(config: EndpointConfig, credentials: tuple[str, str] | None,
                 headers: list[tuple[str, str]], environ: Mapping[str, str]
                 ) -> tuple[str, str | None] | None:
    """(AUTH_SOURCES key, the Authorization value to add: None when --llmperf-header has it)
    from the one place that gives it; None if none. Two places would be two Authorization
    headers, which no server reads the same way."""
    given = []
    if config.api_key:
        given.append(("api_key", f"Bearer {config.api_key}"))
    if credentials is not None:
        given.append(("url", access_mod.basic_auth(*credentials)))
    if any(name.lower() == "authorization" for name, _ in headers):
        given.append(("header", None))
    if len(given) > 1:
        names = {"api_key": "--llmperf-api-key", "url": "the URL's user:password@",
                 "header": "--llmperf-header Authorization"}
        raise ValueError(f"{' and '.join(names[key] for key, _ in given)} each set the "
                         "Authorization header: give one of them")
    return given[0] if given else _openai_key(environ)


def _openai_key(environ: Mapping[str, str]) -> tuple[str, str] | None:
    try:
        key = access_mod.parse_api_key(environ.get(OPENAI_API_KEY, ""))
    except ValueError as exc:
        raise ValueError(f"${OPENAI_API_KEY}: {exc}") from None
    return ("openai", f"Bearer {key}") if key else None


def _owners(body: bytes) -> tuple[str, ...]:
    """The `owned_by` values of an OpenAI model list: which server wrote it (server_kind.py)."""
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return ()
    return tuple(str(entry["owned_by"]) for entry in data or ()
                 if isinstance(entry, dict) and "owned_by" in entry)


def _model_ids(body: bytes) -> tuple[str, ...] | None:
    """The ids of an OpenAI model list ({"data": [{"id": ...}, ...]}), or None for another
    answer."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return None
    return tuple(str(entry["id"]) for entry in data if isinstance(entry, dict) and "id" in entry)
