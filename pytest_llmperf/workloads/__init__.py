"""Requests and arrival patterns: workloads, prompts, datasets, profiles, scenarios, sweeps."""
