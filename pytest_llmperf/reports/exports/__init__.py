"""A stored night in the formats of the tools teams already run (docs/history.md, "Exports"):
Prometheus' text exposition format for a Pushgateway (prometheus.py), Bencher's metric format
(bencher.py) and the PyTorch OSS benchmark database's records (pytorch.py), each made from one
run of the results store (night.py) and named in registry.py."""
