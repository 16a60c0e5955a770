"""What one pytest session holds: what it was asked to do (SessionConfig), the ledger of its
measurements (session/ledger.py), the runner that measures (session/runner.py) and the A/B runs
on top of it (session/ab_run.py), the judge (session/judge.py), the results store's side
(session/history_run.py), and the reports pytest-xdist workers handed over (session/outputs.py).
Each part is handed only the others it needs; nothing takes the whole session.

Owned by the plugin (one per pytest session, kept in `config.stash`), never a module global.
The settings stop at the plugin: it makes each part's config from them (plugin/configs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.engines.pool import EnginePool
from pytest_llmperf.machine.hardware import Fingerprint
from pytest_llmperf.session.ab_run import AbRunner
from pytest_llmperf.session.deployment import Deployment
from pytest_llmperf.session.history_run import SessionHistory
from pytest_llmperf.session.judge import Judge, JudgeConfig
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.outputs import OutputsConfig
from pytest_llmperf.session.runner import Runner, RunnerConfig
from pytest_llmperf.session.target import choose_target

__all__ = ["LlmperfSession", "SessionConfig"]


@dataclass(frozen=True)
class SessionConfig:
    """Each part's share of the options: the runner's, the judge's, the outputs', and what a
    disturbed run does (--llmperf-disturbance: fail, warn or off)."""

    runner: RunnerConfig = RunnerConfig()
    judge: JudgeConfig = JudgeConfig()
    outputs: OutputsConfig = OutputsConfig()
    disturbance: str = "fail"


@dataclass
class LlmperfSession:
    config: SessionConfig
    ledger: Ledger
    runner: Runner
    ab_runner: AbRunner
    judge: Judge
    history: SessionHistory | None = None
    # Report payloads (outputs.payload) of this process and, on an xdist controller, its workers.
    payloads: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, config: SessionConfig, pool: EnginePool, *, fingerprint: Fingerprint,
              gpu_count: int = 0, process_root: int = 0, deployment: Deployment | None = None,
              history: SessionHistory | None = None) -> LlmperfSession:
        """The session's parts, wired: one ledger that the runner and the judge write and the
        outputs read; the target chosen once, here (session/target.py)."""
        ledger = Ledger(fingerprint)
        target = choose_target(deployment, pool, rootdir=config.runner.rootdir,
                               gpu_count=gpu_count, process_root=process_root,
                               judge_disturbance=config.disturbance != "off",
                               stop_disturbed=config.disturbance == "fail")
        runner = Runner(config.runner, target, ledger)
        judge = Judge(config.judge, ledger, runner.server_of, history)
        return cls(config, ledger, runner, AbRunner(runner), judge, history)
