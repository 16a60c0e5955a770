"""The one thing pyproject.toml cannot say without setuptools' experimental table: the C part.

pytest_llmperf/client/_reader.c reads the streaming client's sockets (why: docs/client.md). It is
optional: where it cannot be built (no compiler, not Linux) the install goes on and the client
reads in Python (pytest_llmperf/client/readers.py), slower but the same.
"""

import sys

from setuptools import Extension, setup

setup(ext_modules=[Extension("pytest_llmperf.client._reader", ["pytest_llmperf/client/_reader.c"],
                             optional=True)] if sys.platform == "linux" else [])
