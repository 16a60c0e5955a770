"""Sending and timing: HTTP/1.1 and SSE, socket readers, load patterns and their generation,
client workers, the stall watchdog, what a server kind is sent and answers (server_kind,
server_info, server_metrics), progress lines and the client's self-check. Returns request
records.

May import (pyproject.toml's import-linter layers): metrics/ and the layers below it; never
engines/ (a sibling: the client measures any server, started by us or not), verdict/ or above.
"""
