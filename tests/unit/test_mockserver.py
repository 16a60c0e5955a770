"""The benchmark's mock server (clientbench/mockserver.py): the truth it reports.

The server runs in this test's event loop; the test talks to it over a real socket.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

from pytest_llmperf.clientbench import mockserver


def test_a_request_arrives_when_the_kernel_received_it_not_when_the_server_read_it():
    """The request lands while the server's loop is blocked for 0.2 s: the true TTFT counts that
    wait, as any client sees it (in a closed loop's wave, requests wait for the server just so)."""

    async def go() -> dict:
        loop = asyncio.get_running_loop()
        server = mockserver.MockServer(interval_s=0.01)
        port: asyncio.Future[int] = loop.create_future()
        serving = asyncio.ensure_future(mockserver._serve(server, "127.0.0.1", 0, port.set_result))
        client = socket.create_connection(("127.0.0.1", await port))
        body = json.dumps({"model": "m", "prompt": [1, 2], "max_tokens": 2}).encode()
        client.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                       b"\r\n%s" % (len(body), body))
        time.sleep(0.2)  # the server cannot read it before this returns
        client.setblocking(False)
        received = b""
        while not received.endswith(b"0\r\n\r\n"):
            await asyncio.sleep(0.005)
            try:
                received += client.recv(65536)
            except BlockingIOError:
                pass
        client.close()
        truth = server.truth.summary(server.interval_s)
        serving.cancel()
        return truth

    truth = asyncio.run(go())
    assert truth["streams"] == 1
    assert 0.2 <= truth["ttft_s_p50"] < 0.3
    assert 0.005 < truth["tpot_s_p50"] < 0.02
