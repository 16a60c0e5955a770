"""What one pytest session holds and does, by job: the ledger of measurement records, the
runner that measures into it (and A/B runs on it), the judge (references, gate, A/B, baseline
updates), outputs, the results store's side, a deployment (--llmperf-endpoint).

May import reports/ and every layer below it; never plugin/ (pytest stays there).
"""
