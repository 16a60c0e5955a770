"""Sending and timing: HTTP/1.1 and SSE, socket readers, load generation, client workers, the
stall watchdog, server metrics and the client's self-check. Returns request records."""
