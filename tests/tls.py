"""A real TLS server on 127.0.0.1 for the endpoint tests: a private CA and a certificate it signed
for 127.0.0.1 (made with `cryptography`), and a TLS-terminating proxy in front of a plain-HTTP
server (the mock server, pytest_llmperf/clientbench/mockserver.py, speaks plain HTTP only)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA's certificate: what --llmperf-ca-bundle is given
    cert: Path  # the server's certificate, signed by the CA, for 127.0.0.1 and localhost
    key: Path


def make_certs(directory: Path) -> Certs:
    """A CA and a server certificate it signed, as PEM files in `directory`."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmperf test CA")])
    ca = _signed(x509.CertificateBuilder().subject_name(ca_name).public_key(ca_key.public_key())
                 .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                 .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                              False), critical=True),
                 ca_name, ca_key, ca_key.public_key(), now)
    server_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    alt_names = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                             x509.DNSName("localhost")])
    cert = _signed(x509.CertificateBuilder().subject_name(server_name).public_key(key.public_key())
                   .add_extension(alt_names, critical=False)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True),
                   ca_name, ca_key, key.public_key(), now)
    certs = Certs(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    certs.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    certs.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    certs.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return certs


def _signed(builder, issuer, issuer_key, public_key, now):
    return (builder.issuer_name(issuer).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                issuer_key.public_key()), critical=False)
            .sign(issuer_key, hashes.SHA256()))


class TlsProxy:
    """`with TlsProxy(port, certs) as proxy:` https://127.0.0.1:<proxy.port> forwards every
    connection, decrypted, to 127.0.0.1:`port`. Runs its own event loop in a thread."""

    def __init__(self, target_port: int, certs: Certs) -> None:
        self.target_port = target_port
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(certs.cert, certs.key)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="tls-proxy")
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __enter__(self) -> TlsProxy:
        self._thread.start()
        start = asyncio.start_server(self._forward, "127.0.0.1", 0, ssl=self._context)
        self._server = asyncio.run_coroutine_threadsafe(start, self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self._server.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer),
                             return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
