"""pytest hooks: options, markers, collection (hardware skips, engine ordering), fixture, summary.

Loaded through the `pytest11` entry point. Importing this module must stay cheap and must work
where vLLM is not installed: vLLM only ever runs in the server subprocess.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pytest_llmperf import secrets
from pytest_llmperf.client import progressline
from pytest_llmperf.engines import arg_check
from pytest_llmperf.engines.leases import GpuLeases, visible_gpus
from pytest_llmperf.engines.pool import EnginePool, engine_factory
from pytest_llmperf.engines.ray import RayCluster
from pytest_llmperf.engines.server import CPU_ENGINE_NICE
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.ids import xdist_group
from pytest_llmperf.machine import expect
from pytest_llmperf.machine import hardware as hardware_mod
from pytest_llmperf.machine.neighbours import session_root
from pytest_llmperf.plugin import (
    bisect_option,
    check_baselines,
    configs,
    confirm_later,
    deadline,
    hookspecs,
    markers,
    measurers,
    xdist,
)
from pytest_llmperf.plugin.fixture import Llmperf, engine_of, user_nodeid
from pytest_llmperf.plugin.reporthooks import NAME as REPORTS_PLUGIN
from pytest_llmperf.plugin.reporthooks import ReportHooks
from pytest_llmperf.plugin.running import FixtureConfig, RunningTest
from pytest_llmperf.reports import saved_runs
from pytest_llmperf.session import history_run, outputs
from pytest_llmperf.session import settings as settings_mod
from pytest_llmperf.session.deployment import Deployment
from pytest_llmperf.session.session import LlmperfSession
from pytest_llmperf.session.target import ServingTarget
from pytest_llmperf.verdict import budget, same_node

SESSION_KEY = pytest.StashKey[LlmperfSession]()
SETTINGS_KEY = pytest.StashKey[settings_mod.Settings]()
STARTED_KEY = pytest.StashKey[datetime]()
HARDWARE_KEY = pytest.StashKey[object]()
RAY_KEY = pytest.StashKey[RayCluster]()
MEASURER_KEY = pytest.StashKey[measurers.Measurer]()

# --llmperf-expect's stop: the machine is not the environment the run names (docs/upgrades.md).
EXPECT_EXIT_CODE = 6

NIGHTLY_SKIP = "a nightly test: run it with --llmperf-nightly"
NIGHTLY_MARKER = ("nightly: a long test the nightly job runs (--llmperf-nightly); a run without "
                  "that option skips it")
ENGINE_MARKER = "engine(spec): the pytest_llmperf.Engine this test measures (tests sharing a " \
                "spec run together, so each engine starts once)"
LLMPERF_MARKER = "llmperf(*, repeat=None, slo=None, max_error_rate=0.0, tolerance=None, " \
                 "gate=None): per-test measurement and gate settings"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llmperf", "LLM inference performance (pytest-llmperf)")
    for option in settings_mod.OPTIONS:  # each flag's dest is its ini key: llmperf_<name>
        where = f"env ${option.env}" if option.flag_only else f"ini {option.ini}, env ${option.env}"
        if option.parse is settings_mod.parse_bool:
            group.addoption(option.flag, action="store_true", default=None, dest=option.ini,
                            help=f"{option.help}; {where} (default: off)")
        else:
            default = "not set" if option.default is None else option.default
            group.addoption(option.flag, default=None, dest=option.ini,
                            action="append" if option.many else "store",
                            type=_argparse_type(option.parse),
                            metavar=option.metavar, help=f"{option.help}; {where} "
                                                         f"(default: {default})")
        if not option.flag_only:
            parser.addini(option.ini, help=f"{option.help} (default: {option.default})")


def _argparse_type(parse):
    """argparse shows "invalid <name> value" for a plain ValueError; an ArgumentTypeError keeps
    the parser's own words (what the option accepts)."""
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def pytest_configure(config: pytest.Config) -> None:
    for doc in (*markers.MARKER_DOCS.values(), ENGINE_MARKER, NIGHTLY_MARKER, LLMPERF_MARKER):
        config.addinivalue_line("markers", doc)
    try:
        settings = _settings_of(config)
        deployment = Deployment.of(configs.endpoint_config(settings), os.environ)
        hardware = config.hook.pytest_llmperf_detect_hardware(config=config)
        # The Ray cluster Ray engines join (RAY_ADDRESS's, or a local head the pool stops), and
        # client workers too, where they run on it.
        config.stash[RAY_KEY] = RayCluster(settings.path(settings.log_dir))
        if not xdist.is_controller(config):
            config.stash[SETTINGS_KEY] = settings = configs.on_cluster(settings,
                                                                       config.stash[RAY_KEY])
        session_config = configs.session_config(settings)  # ValueError: a format asked twice
    except ValueError as exc:
        raise pytest.UsageError(f"pytest-llmperf: {exc}") from None
    config.stash[HARDWARE_KEY] = hardware
    fingerprint = hardware_mod.current_fingerprint(hardware)
    _check_expected(settings, fingerprint)
    try:  # a store this session cannot use is refused before anything is measured
        history = history_run.open_history(configs.history_config(settings), fingerprint,
                                           worker=xdist.is_worker(config))
        # A "before" run kept in the store, where this runner has no file of it.
        history_run.fetch_saved(history, settings.compare, settings.runs_dir())
    except ValueError as exc:
        raise pytest.UsageError(f"pytest-llmperf: {exc}") from None
    _check_same_node(settings, fingerprint)
    gpus = visible_gpus(hardware.device_count) if hardware.is_gpu else []
    config.stash[SESSION_KEY] = LlmperfSession.start(
        session_config, _engine_pool(config, settings, hardware, gpus), fingerprint=fingerprint,
        gpu_count=len(gpus), process_root=session_root(xdist.is_worker(config)),
        deployment=deployment, history=history)
    config.stash[STARTED_KEY] = datetime.now(timezone.utc)
    config.pluginmanager.register(ReportHooks(config, SESSION_KEY, STARTED_KEY), REPORTS_PLUGIN)
    config.stash[MEASURER_KEY] = _register_modes(config, settings)
    _stop_engines_on_sigterm(config)


def _settings_of(config: pytest.Config) -> settings_mod.Settings:
    """The session's settings, stashed, and what they need before anything else: vLLM for
    --llmperf-check-args, the check's plugin for --llmperf-check-baselines, the names never
    written out. ValueError (one line) for settings that cannot run."""
    settings = settings_mod.resolve(
        lambda name: config.getoption("llmperf_" + name),
        lambda ini: config.getini(ini), rootdir=Path(str(config.rootpath)),
    )
    if settings.endpoint and not settings.hardware:
        raise ValueError(
            "--llmperf-endpoint needs --llmperf-hardware too (the hardware of that server, "
            "e.g. h100:8), so results are compared with the right baselines")
    config.stash[SETTINGS_KEY] = settings
    if settings.check_args:
        arg_check.require_vllm()
    if settings.check_baselines:
        check_baselines.register(config, settings.path(settings.baseline_dir), settings.rootdir)
    secrets.use_names(settings.secret_names or ())  # before any engine is labelled
    return settings


def _engine_pool(config: pytest.Config, settings: settings_mod.Settings,
                 hardware: hardware_mod.Hardware, gpus: list[str]) -> EnginePool:
    """The pool of the engines this session starts, on `gpus` (leased per engine)."""
    factory = engine_factory(settings.path(settings.log_dir), settings.startup_timeout,
                             _engine_env(config), nice=engine_nice(settings, hardware),
                             separate_control=not hardware.is_gpu, say=_terminal_line(config))
    return EnginePool(factory, capacity=settings.keep_engines,
                      leases=GpuLeases(gpus) if hardware.is_gpu else None,
                      placement=config.stash[RAY_KEY])


def _register_modes(config: pytest.Config, settings: settings_mod.Settings
                    ) -> measurers.Measurer:
    """The plugins of this session's options, and its one measurer (plugin/measurers.py)."""
    later = None
    # Not in a pytest-xdist worker: it checks that each report belongs to the test it is
    # running, so a rerun cannot wait for the end of an engine's tests there; the confirm
    # pairs follow the first ones at once instead.
    if settings.ab and settings.ab_confirm_pairs and not xdist.is_worker(config):
        later = confirm_later.ConfirmLaterPlugin(engine_of)
        config.pluginmanager.register(later, confirm_later.PLUGIN_NAME)
    if settings.bisect and not xdist.is_worker(config):
        config.pluginmanager.register(bisect_option.BisectPlugin(settings),
                                      bisect_option.PLUGIN_NAME)
    if settings.deadline is not None:
        config.pluginmanager.register(deadline.DeadlinePlugin(settings.deadline),
                                      deadline.PLUGIN_NAME)
    return config.hook.pytest_llmperf_make_measurer(
        config=config, measuring=measurers.measuring_of(settings, later))


@pytest.hookimpl(trylast=True)
def pytest_llmperf_make_measurer(config: pytest.Config, measuring: measurers.Measure
                                 ) -> measurers.Measurer:
    """The built-in modes, after any a conftest or a plugin of the plugin answers with."""
    return measurers.choose_measurer(config.stash[SETTINGS_KEY], measuring,
                                     check=check_baselines.plugin_of(config))


def _check_expected(settings: settings_mod.Settings,
                    fingerprint: hardware_mod.Fingerprint) -> None:
    """--llmperf-expect: a machine that is not the environment the run names stops here, before
    any engine starts or store is opened, with its own exit code (pytest's are 0 to 5)."""
    if settings.expect:
        line = expect.mismatch_line(settings.expect, fingerprint.to_dict())
        if line:
            pytest.exit(line, returncode=EXPECT_EXIT_CODE)


def _check_same_node(settings: settings_mod.Settings,
                     fingerprint: hardware_mod.Fingerprint) -> None:
    """--llmperf-compare is a before/after on one node: a run saved on another host or other
    cards is refused before any engine starts. A file that cannot be read is left to each
    test's verdict, which names the problem (session/judge.py)."""
    if not settings.compare:
        return
    try:
        path = saved_runs.resolve_saved(settings.compare, settings.runs_dir())
        saved = saved_runs.read_run(path)
    except saved_runs.RunFileError:
        return
    refused = same_node.refusal(saved.fingerprint, fingerprint.to_dict(), settings.compare)
    if refused:
        raise pytest.UsageError(f"pytest-llmperf: {refused}")


def engine_nice(settings: settings_mod.Settings, hardware: hardware_mod.Hardware) -> int:
    """auto: lowest priority for engines on CPU hardware, where the engine and the load
    generator share cores; never on GPUs, where a niced engine would just measure slower."""
    if settings.engine_nice != "auto":
        return settings.engine_nice
    return 0 if hardware.is_gpu else CPU_ENGINE_NICE


@pytest.hookimpl(trylast=True)
def pytest_llmperf_detect_hardware(config: pytest.Config):
    return hardware_mod.detect_hardware(override=config.stash[SETTINGS_KEY].hardware)


@pytest.hookimpl(trylast=True)
def pytest_llmperf_engine_env(config: pytest.Config):
    """Under pytest-xdist on CPU hardware, worker N computes on core N (mod the cores): two
    engines never share a core. GPUs are not assigned here but leased per engine (leases.py)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    hardware = config.stash.get(HARDWARE_KEY, None)
    if not worker.startswith("gw") or hardware is None or hardware.is_gpu:
        return {}
    cores = sorted(os.sched_getaffinity(0))
    return {"VLLM_CPU_OMP_THREADS_BIND": str(cores[int(worker[2:]) % len(cores)])}


def pytest_sessionstart(session: pytest.Session) -> None:
    """With --llmperf-endpoint, before the first test: can its server be used at all (reached,
    with the key, serving --llmperf-model)? A session that cannot measure ends here in one line
    instead of failing every test. The pytest-xdist controller asks for its workers."""
    target = _target_to_check(session.config)
    if target is not None:
        try:
            target.preflight()
        except ValueError as exc:
            raise pytest.UsageError(f"pytest-llmperf: {exc}") from None


def pytest_collection_finish(session: pytest.Session) -> None:
    """...and does it serve the model of each test that will run? (Under pytest-xdist each
    worker checks at each test instead: an error raised in a worker's collection is no line.)"""
    llmperf = session.config.stash.get(SESSION_KEY, None)
    if llmperf is not None:  # the run's false-alarm budget is shared among these (budget.py)
        llmperf.judge.comparisons = budget.planned(
            sum("llmperf" in getattr(item, "fixturenames", ()) for item in session.items))
    target = _target_to_check(session.config)
    if target is None:
        return
    for item in session.items:
        engine = engine_of(item)
        if engine is not None and item.get_closest_marker("skip") is None:
            try:
                target.check_served(engine, f"the Engine of {user_nodeid(item)}")
            except ValueError as exc:
                raise pytest.UsageError(f"pytest-llmperf: {exc}") from None


def _target_to_check(config: pytest.Config) -> ServingTarget | None:
    """The session's target (session/target.py), where this process checks it before the
    tests: not in a pytest-xdist worker (the controller did) and not for --collect-only
    (nothing is sent). Only an endpoint has anything to check."""
    llmperf = config.stash.get(SESSION_KEY, None)
    if llmperf is None or xdist.is_worker(config) or config.option.collectonly:
        return None
    return llmperf.runner.target


def pytest_report_header(config: pytest.Config) -> str | None:
    hardware = config.stash.get(HARDWARE_KEY, None)
    return hardware_mod.current_fingerprint(hardware).header_line() if hardware else None


def _engine_env(config: pytest.Config) -> dict[str, str]:
    """Environment for engines this process starts (per-xdist-worker devices, see hooks)."""
    return config.hook.pytest_llmperf_engine_env(config=config) or {}


def _terminal_line(config: pytest.Config):
    """Writes a line to the terminal as it comes, past pytest's capture: the weights fetched
    before an engine starts (engines/weights.py), a download that may take many minutes."""
    def say(line: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:  # a pytest-xdist worker, or -p no:terminal
            print(f"pytest-llmperf: {line}", file=sys.stderr, flush=True)
        else:
            reporter.write_line(f"pytest-llmperf: {line}")
            reporter.flush()

    return say


def _stop_engines_on_sigterm(config: pytest.Config) -> None:
    """CI runners stop jobs with SIGTERM; turn it into KeyboardInterrupt so pytest's teardown
    (and with it the engine shutdown) runs instead of the process vanishing mid-test."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"pytest-llmperf: received signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (e.g. embedded pytest.main in a thread)
        return
    config.add_cleanup(lambda: signal.signal(signal.SIGTERM, previous))


def pytest_unconfigure(config: pytest.Config) -> None:
    arg_check.close_all()  # --llmperf-check-args's parser processes, where any were started
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.runner.pool.stop_all()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop engines; then a pytest-xdist worker hands its report to the controller, and the
    controller (or a plain run) writes the JSON files from everyone's results."""
    config = session.config
    llmperf = config.stash.get(SESSION_KEY, None)
    if llmperf is None:
        return
    llmperf.runner.pool.stop_all()
    mine = outputs.payload(llmperf.ledger, llmperf.config.outputs, llmperf.runner.pool,
                           config.stash[STARTED_KEY], recorded=llmperf.history is not None)
    if xdist.is_worker(config):
        xdist.hand_over(config, mine)
        return
    llmperf.payloads.append(mine)
    outputs.add_notes(llmperf.payloads,
                      outputs.write_documents(llmperf.config.outputs, llmperf.payloads))
    outputs.add_notes(llmperf.payloads,
                      history_run.record_run(llmperf.history, llmperf.payloads))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist controller: collect a finished worker's report."""
    llmperf = node.config.stash.get(SESSION_KEY, None)
    share = xdist.handed_over(node)
    if llmperf is not None and share:
        llmperf.payloads.append(share)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Tests that share an engine go to one pytest-xdist worker (xdist.use_loadgroup)."""
    xdist.use_loadgroup(config)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Skip tests whose hardware is absent (not with --llmperf-check-args or
    --llmperf-check-baselines, which start nothing: every selected test is checked); group tests
    by engine so each starts once (and tag the groups for pytest-xdist's loadgroup
    scheduling)."""
    hardware = config.stash.get(HARDWARE_KEY, None)
    settings = config.stash.get(SETTINGS_KEY, None)
    checking = settings is not None and (settings.check_args or settings.check_baselines)
    if checking:
        hardware = None
    nightly = checking or (settings is not None and settings.nightly)
    for item in items:
        if not nightly and item.get_closest_marker("nightly") is not None:
            item.add_marker(pytest.mark.skip(reason=NIGHTLY_SKIP))
            continue
        try:
            requirement = markers.parse_requirements(
                (mark.name, mark.args, mark.kwargs) for mark in item.iter_markers()
                if mark.name in markers.MARKER_DOCS
            )
        except (TypeError, ValueError) as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        if hardware is not None:  # a Ray engine's markers count its cluster's GPUs (ray.py)
            reason = markers.skip_reason(requirement, config.stash[RAY_KEY].hardware_for(
                engine_of(item), hardware))
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
    items[:] = order_by_engine(items)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Tag each test with its engine's xdist_group as it is collected: pytest-xdist's worker
    turns the tag into a node-id suffix in its own collection_modifyitems, which runs before
    ours, so by then the tag must already be there."""
    engine = engine_of(item)
    if engine is not None:
        item.add_marker(pytest.mark.xdist_group(xdist_group(engine.digest())))


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The last test of an engine's group stops it: its memory and GPUs go to the next group
    (or to another pytest-xdist worker) instead of idling until the session ends. So does the
    other side of an A/B test beyond --llmperf-keep-engines, unless the next test needs it."""
    session = item.config.stash.get(SESSION_KEY, None)
    later = item.config.pluginmanager.get_plugin(confirm_later.PLUGIN_NAME)
    if session is None or (later and later.keeps_engine(item)):
        return
    engine, following = engine_of(item), engine_of(nextitem) if nextitem else None
    if engine is not None and following != engine:
        session.runner.pool.stop(engine)
    session.runner.pool.trim(keep=following)


def order_by_engine(items: list[pytest.Item]) -> list[pytest.Item]:
    """Stable sort: tests with the same engine spec become adjacent, in first-seen order."""
    first_seen: dict[Engine | None, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(engine_of(item), index)
    return sorted(items, key=lambda item: first_seen[engine_of(item)])


@pytest.fixture
def llmperf(request: pytest.FixtureRequest) -> Llmperf:
    """Run a workload against an engine and get the measured Result: `llmperf.run(workload)`."""
    session, config = request.config.stash[SESSION_KEY], request.config
    test = RunningTest(request.node, session.runner, session.ab_runner, session.judge,
                       FixtureConfig.of(config.stash[SETTINGS_KEY]))
    return Llmperf(test, config.stash[MEASURER_KEY])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Measurements in the test show their live progress line (progressline.py)."""
    with progressline.showing(progress_display(item)):
        return (yield)


def progress_display(item: pytest.Item) -> progressline.Display | None:
    """Where the test's progress line goes: pytest's terminal, its capture suspended while the
    line is written. None under a pytest-xdist worker (its output is not the user's terminal)
    or without pytest's terminal reporter."""
    config = item.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if xdist.is_worker(config) or reporter is None or capture is None:
        return None

    def write(text: str) -> None:
        with capture.global_and_fixture_disabled():  # as pytest's own live logging writes
            sys.stdout.write(text)
            sys.stdout.flush()

    return progressline.Display(user_nodeid(item), write, tty=bool(reporter.isatty),
                                column=lambda: reporter._tw.width_of_current_line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """Baseline updates wait for the test's verdict: only a passing test writes its baseline."""
    report = yield
    if report.when == "call":
        session = item.config.stash.get(SESSION_KEY, None)
        if session is not None and item.nodeid in session.judge.updates.pending:
            errors = session.judge.apply_updates(item.nodeid, passed=report.passed)
            if errors:  # the test's own failure, not an INTERNALERROR that ends the session
                report.outcome, report.longrepr = "failed", "\n".join(errors)
    return report


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    full = config.option.verbose > 0 or config.stash[SETTINGS_KEY].summary == "full"
    lines = outputs.summary(session.payloads, full=full) if session is not None else []
    if lines:
        terminalreporter.section("llmperf")
        for line in lines:
            terminalreporter.write_line(line)
