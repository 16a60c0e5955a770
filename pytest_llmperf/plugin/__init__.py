"""pytest plugin: hooks, options, markers, the llmperf fixture, xdist and ordering."""
