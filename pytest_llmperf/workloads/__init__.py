"""Requests and arrival patterns: workloads, prompts, datasets, profiles, traces,
conversations, scenarios, sweeps and the identity a baseline records of a workload.

May import verdict/ and the layers below it (a sweep's capacity search checks SLOs).
"""
