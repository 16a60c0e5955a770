"""How the client reaches a server it did not start: the URL's forms, the headers every request
carries (an API key, the user's own, Basic auth from the URL) and whom TLS trusts.

Endpoint mode (--llmperf-endpoint) measures deployments: behind a gateway that wants a key, a proxy
that wants headers of its own, TLS with a private CA. Every request the plugin makes of such a
server (the streams, /metrics, /v1/models, /version) takes its headers and TLS context from one
`Access`, so none of them can forget the key. Header values that are secrets (an Authorization,
a Cookie, a name secrets.is_secret finds secret) are never written out: error lines that could
echo them go through `Access.redact` (docs/deployments.md).
"""

from __future__ import annotations

import base64
import binascii
import re
import ssl
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from pytest_llmperf.secrets import MARKER, is_secret, redact_text

__all__ = ["Access", "basic_auth", "get", "parse_api_key", "parse_headers", "split_url"]

# Headers the client writes itself (http1.ConnectionPool.request_bytes): a second one would
# break the request's framing or contradict it.
RESERVED = frozenset({"host", "content-type", "content-length", "accept", "transfer-encoding",
                      "connection"})
# Credentials whatever secrets.is_secret says of their names.
ALWAYS_SECRET = frozenset({"authorization", "proxy-authorization", "cookie"})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # a header name: RFC 9110, section 5.6.2
_VALUE = re.compile(r"[\x20-\x7e\t]*")  # printable ASCII: what every server reads the same way


@dataclass(frozen=True)
class Access:
    """The headers every request carries, in order, and the TLS trust for https URLs."""

    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    ca_bundle: str | None = None  # a PEM file of the CAs to trust instead of the system's
    insecure: bool = False  # no certificate check at all

    def ssl_context(self) -> ssl.SSLContext:
        """The system's trust (as `vllm bench serve` and curl use), a private CA's, or none."""
        context = ssl.create_default_context(cafile=self.ca_bundle)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def header_lines(self) -> bytes:
        """The headers as they go into an HTTP/1.1 request head."""
        return b"".join(b"%s: %s\r\n" % (name.encode(), value.encode())
                        for name, value in self.headers)

    def secret_values(self) -> tuple[str, ...]:
        """What `redact` hides: each secret header's value, its credential after the scheme
        (`Bearer KEY`: KEY too), and a Basic credential's password."""
        values: list[str] = []
        for name, value in self.headers:
            if name.lower() in ALWAYS_SECRET or is_secret(name):
                values.append(value)
                scheme, _, credential = value.partition(" ")
                if credential.strip():
                    values.append(credential.strip())
                if scheme.lower() == "basic":
                    values += _basic_parts(credential.strip())
        return tuple(values)

    def redact(self, text: str) -> str:
        """`text` (an error line, a server's answer) with every secret value as the marker."""
        return redact_text(text, self.secret_values()) if self.headers else text


def _basic_parts(credential: str) -> list[str]:
    try:
        user_pass = base64.b64decode(credential, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return []
    password = user_pass.partition(":")[2]
    return [user_pass, password] if password else [user_pass]


def basic_auth(user: str, password: str) -> str:
    """The Authorization value for a URL's `user:pass@` (RFC 7617)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def split_url(text: str) -> tuple[str, tuple[str, str] | None]:
    """An endpoint URL as users write it -> (the base URL requests are made under, the URL's
    user and password or None). `http://host:8000`, `.../v1`, `.../v1/` and a trailing slash all
    give `http://host:8000` (the client adds /v1/completions, /metrics, ...); a path before /v1
    stays (a gateway's prefix). ValueError (one line, the password hidden) if it is no URL."""
    url = urlsplit(text.strip())
    shown = shown_url(text)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"--llmperf-endpoint {shown!r} is not an http(s)://host[:port][/path] "
                         "URL; give the server's base URL, e.g. http://127.0.0.1:8000")
    try:
        url.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        raise ValueError(f"--llmperf-endpoint {shown!r} has a port that is not a number; give "
                         "the server's base URL, e.g. http://127.0.0.1:8000") from None
    if url.query or url.fragment:
        raise ValueError(f"--llmperf-endpoint {shown!r} has a query or fragment; give the "
                         "server's base URL without them")
    path = url.path.rstrip("/")
    path = path[:-len("/v1")] if path.endswith("/v1") else path
    host = url.netloc.rpartition("@")[2]
    base = urlunsplit((url.scheme, host, path, "", ""))
    credentials = (unquote(url.username or ""), unquote(url.password or ""))
    return base, credentials if url.username is not None else None


def shown_url(text: str) -> str:
    """A URL as lines may show it: a password in it is the marker."""
    url = urlsplit(text.strip())
    if url.password is None:
        return text.strip()
    user, _, host = url.netloc.rpartition("@")
    return urlunsplit(url._replace(netloc=f"{user.partition(':')[0]}:{MARKER}@{host}"))


def parse_headers(text: str) -> tuple[tuple[str, str], ...]:
    """`Name: value` lines (an ini value or $LLMPERF_HEADER may hold several) -> pairs. The
    errors never repeat the text: a value may be a secret."""
    pairs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _TOKEN.fullmatch(name):
            raise ValueError("expected 'Name: value' (a header name, a colon, its value)")
        if name.lower() in RESERVED:
            raise ValueError(f"the client writes the {name} header itself; drop it")
        if not _VALUE.fullmatch(value):
            raise ValueError(f"the value of header {name} is not printable ASCII; HTTP/1.1 "
                             "headers need it")
        pairs.append((name, value))
    return tuple(pairs)


def parse_api_key(text: str) -> str | None:
    """An API key, as `Authorization: Bearer KEY` carries it; empty means none."""
    key = text.strip()
    if not _VALUE.fullmatch(key) or " " in key or "\t" in key:
        raise ValueError("expected one key of printable ASCII without spaces")
    return key or None


def get(base_url: str, path: str, access: Access, timeout_s: float) -> httpx.Response:
    """One GET of a control path (/v1/models, /version) with the access's headers and TLS; the
    errors are httpx's."""
    with httpx.Client(headers=list(access.headers), verify=access.ssl_context(),
                      timeout=timeout_s) as http:
        return http.get(base_url + path)
