"""The client as a measuring instrument, proven: a mock server of known timing (mockserver,
mockstreams, mockwire, mockprocess) and `llmperf bench-client`, our client against
`vllm bench serve` on the same load (bench, vllm_cli).

May import every layer below it but cli/ (the top); it is the only layer besides engines/ that
imports vLLM (its reference run).
"""
