"""The pytest plugin, the only layer that imports pytest: hooks, options, markers, the
`llmperf` fixture, deferred confirm pairs, report hooks, pytest-xdist and the baseline check.

May import every layer below it (session/ and down); cli/ and clientbench/ sit above it.
"""
