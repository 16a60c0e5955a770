"""SSE lines as vLLM 0.32 streams them, shared by the SSE decoder's and the client's tests."""

# Completions chunks with return_token_ids; then usage, chat, and the end of the stream.
COMPLETION_CHUNK = ('data: {"choices":[{"index":0,"text":" foo","token_ids":[123],'
                    '"finish_reason":null}],"usage":null}')
EMPTY_TEXT_ONE_ID = 'data: {"choices":[{"index":0,"text":"","token_ids":[5]}],"usage":null}'
TWO_IDS = 'data: {"choices":[{"index":0,"text":" a b","token_ids":[5,6]}],"usage":null}'
USAGE = ('data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":8,'
         '"total_tokens":24}}')
# The last token's chunk, and usage as --enable-prompt-tokens-details sends it.
FINISH = ('data: {"choices":[{"index":0,"text":" z","token_ids":[7],'
          '"finish_reason":"length"}],"usage":null}')
USAGE_CACHED = ('data: {"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":8,'
                '"total_tokens":24,"prompt_tokens_details":{"cached_tokens":12}}}')
CHAT_ROLE = 'data: {"choices":[{"delta":{"role":"assistant","content":""},"token_ids":null}]}'
CHAT_TOKEN = 'data: {"choices":[{"delta":{"content":" hi"},"token_ids":[42]}]}'
DONE = "data: [DONE]"
