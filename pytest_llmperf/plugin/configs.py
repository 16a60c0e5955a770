"""Where the settings stop: each part of the session gets its own config, made here from the
one Settings object (session/settings.py), so no module below the plugin takes the whole of it.
A part names what it reads, and a test of that part builds only that."""

from __future__ import annotations

import dataclasses

from pytest_llmperf.engines.ray import RayCluster
from pytest_llmperf.session.client_cluster import on_client_cluster
from pytest_llmperf.session.deployment import EndpointConfig
from pytest_llmperf.session.history_run import HistoryConfig
from pytest_llmperf.session.judge import BASELINES, SAVED_RUN, SIDE_A, UPDATE, JudgeConfig
from pytest_llmperf.session.outputs import OutputsConfig
from pytest_llmperf.session.runner import RunnerConfig
from pytest_llmperf.session.session import SessionConfig
from pytest_llmperf.session.settings import Settings

__all__ = ["endpoint_config", "history_config", "on_cluster", "session_config"]


def on_cluster(settings: Settings, cluster: RayCluster) -> Settings:
    """`settings` with `--llmperf-client-workers ray[:N]` resolved on `cluster` (unchanged for
    any other choice); ValueError (one line) where the cluster cannot be reached."""
    return dataclasses.replace(settings, client_workers=on_client_cluster(
        settings.client_workers, cluster))


def session_config(settings: Settings) -> SessionConfig:
    """The runner's, the judge's and the outputs' shares. ValueError (one line) for an output
    format asked for twice."""
    return SessionConfig(runner_config(settings), judge_config(settings),
                         outputs_config(settings), settings.disturbance)


def runner_config(settings: Settings) -> RunnerConfig:
    return RunnerConfig(settings.rootdir, settings.path(settings.log_dir),
                        settings.stall_timeout, settings.client_workers)


def judge_config(settings: Settings) -> JudgeConfig:
    reference = (UPDATE if settings.update_baselines else SIDE_A if settings.ab
                 else SAVED_RUN if settings.compare else BASELINES)
    return JudgeConfig(settings.path(settings.baseline_dir), settings.rootdir, reference,
                       settings.compare, settings.require_baseline,
                       outputs_must_match=settings.outputs == "must-match")


def outputs_config(settings: Settings) -> OutputsConfig:
    return OutputsConfig(tuple(settings.formats().values()), settings.rootdir,
                         settings.cost_per_hour)


def endpoint_config(settings: Settings) -> EndpointConfig:
    return EndpointConfig(settings.endpoint, settings.api_key, settings.header or (),
                          settings.path(settings.ca_bundle) if settings.ca_bundle else None,
                          settings.insecure, settings.model, settings.server_kind)


def history_config(settings: Settings) -> HistoryConfig:
    saved = settings.formats().get("save")
    return HistoryConfig(settings.history, settings.rootdir, settings.trend,
                         settings.trend_window, settings.from_history, settings.update_baselines,
                         saved and saved.value)
