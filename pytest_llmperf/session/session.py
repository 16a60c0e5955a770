"""What one pytest session holds: its settings, the ledger of its measurements
(session/ledger.py), the runner that measures (session/runner.py) and the A/B runs on top of it
(session/ab_run.py), the judge (session/judge.py), the results store's side
(session/history_run.py), and the reports pytest-xdist workers handed over (session/outputs.py).
Each part is handed only the others it needs; nothing takes the whole session.

Owned by the plugin (one per pytest session, kept in `config.stash`), never a module global.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.engines.pool import EnginePool
from pytest_llmperf.machine.hardware import Fingerprint
from pytest_llmperf.session.ab_run import AbRunner
from pytest_llmperf.session.deployment import Deployment
from pytest_llmperf.session.history_run import SessionHistory
from pytest_llmperf.session.judge import Judge, JudgeConfig
from pytest_llmperf.session.ledger import Ledger
from pytest_llmperf.session.runner import Runner, RunnerConfig
from pytest_llmperf.session.settings import Settings
from pytest_llmperf.session.target import choose_target

__all__ = ["LlmperfSession"]


@dataclass
class LlmperfSession:
    settings: Settings
    ledger: Ledger
    runner: Runner
    ab_runner: AbRunner
    judge: Judge
    history: SessionHistory | None = None
    # Report payloads (outputs.payload) of this process and, on an xdist controller, its workers.
    payloads: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, settings: Settings, pool: EnginePool, *, fingerprint: Fingerprint,
              gpu_count: int = 0, process_root: int = 0, deployment: Deployment | None = None,
              history: SessionHistory | None = None) -> LlmperfSession:
        """The session's parts, wired: one ledger that the runner and the judge write and the
        outputs read; the target chosen once, here (session/target.py)."""
        ledger = Ledger(fingerprint)
        if deployment is None:
            deployment = Deployment.from_settings(settings, os.environ)
        target = choose_target(deployment, pool, rootdir=settings.rootdir, gpu_count=gpu_count,
                               process_root=process_root,
                               judge_disturbance=settings.disturbance != "off",
                               stop_disturbed=settings.disturbance == "fail")
        runner = Runner(RunnerConfig.of(settings), target, ledger)
        judge = Judge(JudgeConfig.of(settings), ledger, runner.server_of, history)
        return cls(settings, ledger, runner, AbRunner(runner), judge, history)
