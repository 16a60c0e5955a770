"""Chunks of a reasoning request's stream as vLLM 0.32.0 sends them with --reasoning-parser
deepseek_r1 and return_token_ids (client/sse.py reads them; workloads/reasoning.py says why)."""

ROLE = 'data: {"choices":[{"delta":{"role":"assistant","content":""},"token_ids":null}]}'
# The <think> and </think> tokens each come alone: the parser gives no delta, the ids still go.
MARKER = 'data: {"choices":[{"delta":{},"token_ids":[4096]}]}'
THOUGHT = 'data: {"choices":[{"delta":{"reasoning":" hm"},"token_ids":[17]}]}'
OLD_THOUGHT = 'data: {"choices":[{"delta":{"reasoning_content":""},"token_ids":[18,19]}]}'
ANSWER = 'data: {"choices":[{"delta":{"content":" yes"},"token_ids":[21]}]}'
USAGE = ('data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":7,'
         '"total_tokens":16,"completion_tokens_details":{"reasoning_tokens":3}}}')
DONE = "data: [DONE]"
STREAM = [ROLE, MARKER, THOUGHT, OLD_THOUGHT, MARKER, ANSWER, ANSWER, USAGE, DONE]
