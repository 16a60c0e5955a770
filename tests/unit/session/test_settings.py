"""Settings: one value per option from command line > environment > ini > default, with errors
that name where the bad value came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.session import settings as settings_mod
from pytest_llmperf.session.settings import (
    OPTIONS,
    Settings,
    parse_bool,
    parse_client_workers,
    resolve,
)


def sources(cli=None, ini=None):
    """get_cli / get_ini as the plugin passes them: by option name and by ini key."""
    cli, ini = cli or {}, ini or {}
    return (lambda name: cli.get(name)), (lambda key: ini.get(key))


def settings(cli=None, ini=None, env=None, rootdir=Path(".")) -> Settings:
    get_cli, get_ini = sources(cli, ini)
    return resolve(get_cli, get_ini, env or {}, rootdir=rootdir)


def test_defaults():
    assert settings() == Settings(
        log_dir=Path(".llmperf/logs"), startup_timeout=900.0, stall_timeout=120.0, keep_engines=1, engine_nice="auto",
        hardware=None, endpoint=None, server_kind="auto", api_key=None, header=None, ca_bundle=None, insecure=False,
        model=None, client_workers="auto", client_check="fail", disturbance="fail", baseline_dir=Path("baselines"),
        repeat=1, json=None, require_baseline=False, update_baselines=False, save=None,
        compare=None, ab=None, ab_a=None, ab_pairs=4, ab_tolerance=0.1, ab_confirm_pairs=4,
            inconclusive="warn", outputs="note", expect=None, summary="short", output=None, markdown=None,
        html=None,
        cost_per_hour=None, history=".llmperf/history.sqlite", trend=False, trend_window=3,
        from_history=None, secret_names=None,
        rootdir=Path("."),
    )


def test_names_derive_from_the_option():
    option = next(o for o in OPTIONS if o.name == "startup_timeout")
    assert (option.flag, option.ini, option.env) == (
        "--llmperf-startup-timeout", "llmperf_startup_timeout", "LLMPERF_STARTUP_TIMEOUT"
    )


def test_command_line_beats_environment_beats_ini():
    # The CLI value arrives already parsed by argparse (an int here, not a string).
    assert settings(cli={"repeat": 5}, ini={"llmperf_repeat": "3"},
                    env={"LLMPERF_REPEAT": "2"}).repeat == 5
    # A CI job's LLMPERF_* overrides the committed ini for that run.
    assert settings(ini={"llmperf_repeat": "3"}, env={"LLMPERF_REPEAT": "2"}).repeat == 2
    assert settings(ini={"llmperf_repeat": "3"}).repeat == 3
    assert settings().repeat == 1


def test_an_empty_ini_value_falls_through_to_the_environment():
    # pytest returns "" for an ini key that is declared but not set.
    assert settings(ini={"llmperf_repeat": ""}, env={"LLMPERF_REPEAT": "4"}).repeat == 4


def test_values_are_parsed_per_option():
    resolved = settings(
        ini={"llmperf_startup_timeout": "60", "llmperf_log_dir": "/var/log/llmperf",
             "llmperf_engine_nice": "10", "llmperf_hardware": "h100:8"},
        env={"LLMPERF_JSON": "out/run.json", "LLMPERF_ENDPOINT": "http://127.0.0.1:8000"},
    )
    assert resolved.startup_timeout == 60.0 and isinstance(resolved.startup_timeout, float)
    assert resolved.log_dir == Path("/var/log/llmperf")
    assert resolved.engine_nice == 10
    assert resolved.hardware == "h100:8"
    assert resolved.json == Path("out/run.json")
    assert resolved.endpoint == "http://127.0.0.1:8000"


def test_empty_json_path_in_the_environment_means_none():
    assert settings(env={"LLMPERF_JSON": ""}).json is None


def test_parse_error_names_the_environment_variable():
    with pytest.raises(ValueError) as excinfo:
        settings(env={"LLMPERF_REPEAT": "x"})
    assert str(excinfo.value) == "$LLMPERF_REPEAT='x': expected a whole number >= 1"


def test_parse_error_names_the_ini_key():
    with pytest.raises(ValueError) as excinfo:
        settings(ini={"llmperf_engine_nice": "low"})
    assert str(excinfo.value) == (
        "ini llmperf_engine_nice='low': expected auto, or a niceness from 0 to 19")


def test_a_valid_cli_value_hides_a_broken_environment_value():
    # The first source with a value wins; later ones are not even parsed.
    assert settings(cli={"repeat": 2}, env={"LLMPERF_REPEAT": "x"}).repeat == 2


@pytest.mark.parametrize("text", ["1", "true", "YES", " on "])
def test_parse_bool_true(text):
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["0", "false", "No", "off", ""])
def test_parse_bool_false(text):
    assert parse_bool(text) is False


def test_bool_parse_error_names_the_variable():
    with pytest.raises(ValueError) as excinfo:
        settings(env={"LLMPERF_UPDATE_BASELINES": "maybe"})
    assert str(excinfo.value) == (
        "$LLMPERF_UPDATE_BASELINES='maybe': expected true/false, got 'maybe'"
    )


def test_flag_only_options_ignore_ini():
    # Updating baselines is an action for one run, never a standing setting in pytest.ini.
    ini = {"llmperf_update_baselines": "true", "llmperf_require_baseline": "true"}
    resolved = settings(ini=ini)
    assert resolved.update_baselines is False
    assert resolved.require_baseline is False


def test_flag_only_options_still_read_the_environment_and_the_command_line():
    # CI sets LLMPERF_REQUIRE_BASELINE=1 for the whole job.
    assert settings(env={"LLMPERF_REQUIRE_BASELINE": "1"}).require_baseline is True
    assert settings(cli={"update_baselines": True}).update_baselines is True


def test_flag_only_is_exactly_the_two_actions():
    # ... and how the second one takes its numbers (from the results store), which a committed
    # ini must not turn on for every run either.
    # --llmperf-check-args starts no engine at all: an ini that turned it on for every run would
    # make every nightly run measure nothing; so does --llmperf-check-baselines.
    assert [o.name for o in OPTIONS if o.flag_only] == ["require_baseline", "update_baselines",
                                                        "from_history", "check_args",
                                                        "check_baselines"]


RANGE_ERRORS = [
    ("repeat", "0", "expected a whole number >= 1"),
    ("keep_engines", "0", "expected a whole number >= 1"),
    ("engine_nice", "20", "expected auto, or a niceness from 0 to 19"),
    ("engine_nice", "-1", "expected auto, or a niceness from 0 to 19"),
    ("startup_timeout", "0", "expected a number of seconds above 0"),
    ("startup_timeout", "inf", "expected a number of seconds above 0"),
    ("disturbance", "maybe", "expected fail, warn or off"),
    ("client_check", "off", "expected fail or warn"),
]


@pytest.mark.parametrize(("name", "text", "rule"), RANGE_ERRORS)
def test_a_value_out_of_range_names_the_environment_variable_it_came_from(name, text, rule):
    with pytest.raises(ValueError) as excinfo:
        settings(env={f"LLMPERF_{name.upper()}": text})
    assert str(excinfo.value) == f"$LLMPERF_{name.upper()}={text!r}: {rule}"


@pytest.mark.parametrize(("name", "text", "rule"), RANGE_ERRORS)
def test_a_value_out_of_range_names_the_ini_key_it_came_from(name, text, rule):
    with pytest.raises(ValueError) as excinfo:
        settings(ini={f"llmperf_{name}": text})
    assert str(excinfo.value) == f"ini llmperf_{name}={text!r}: {rule}"


@pytest.mark.parametrize(("name", "text", "rule"), RANGE_ERRORS)
def test_a_value_out_of_range_names_the_flag_it_came_from(name, text, rule, pytester):
    flag = "--llmperf-" + name.replace("_", "-")
    with pytest.raises(pytest.UsageError) as excinfo:
        pytester.parseconfig(f"{flag}={text}")
    assert f"error: argument {flag}: {rule}\n" in str(excinfo.value)


@pytest.mark.parametrize("nice", [0, 19])
def test_engine_nice_range_is_inclusive(nice):
    assert settings(cli={"engine_nice": nice}).engine_nice == nice


def test_engine_nice_auto_from_ini():
    assert settings(ini={"llmperf_engine_nice": "auto"}).engine_nice == "auto"


def test_startup_timeout_nan_is_refused():
    with pytest.raises(ValueError, match=r"^\$LLMPERF_STARTUP_TIMEOUT|^--llmperf-startup-timeout"):
        settings(env={"LLMPERF_STARTUP_TIMEOUT": "nan"})


def test_relative_paths_are_relative_to_rootdir(tmp_path):
    resolved = settings(rootdir=tmp_path)
    assert resolved.path(resolved.baseline_dir) == tmp_path / "baselines"
    assert resolved.path(resolved.log_dir) == tmp_path / ".llmperf" / "logs"
    assert resolved.path(Path("/abs/dir")) == Path("/abs/dir")


def test_settings_are_frozen():
    with pytest.raises(AttributeError):
        settings().repeat = 2  # type: ignore[misc]


def test_environ_defaults_to_the_process_environment(monkeypatch):
    # environ=None means os.environ, so a real CI variable is seen.
    monkeypatch.setenv("LLMPERF_KEEP_ENGINES", "3")
    get_cli, get_ini = sources()
    assert resolve(get_cli, get_ini).keep_engines == 3


# ------------------------------------------------------------------ client_workers

CORES_RULE = ("expected auto, a whole number from 1 to 4 (the cores this process may use), or "
              "ray[:N] (N workers on the Ray cluster)")


@pytest.fixture
def four_cores(monkeypatch):
    """The client-worker limit is the cores this process may use; pin it for exact messages."""
    monkeypatch.setattr(settings_mod, "usable_cores", lambda: 4)


def test_client_workers_default_is_auto():
    assert settings().client_workers == "auto"


def test_client_workers_option_names():
    option = next(o for o in OPTIONS if o.name == "client_workers")
    assert (option.flag, option.ini, option.env) == (
        "--llmperf-client-workers", "llmperf_client_workers", "LLMPERF_CLIENT_WORKERS"
    )
    assert option.parse is parse_client_workers and option.default == "auto"


@pytest.mark.parametrize("text", ["auto", "AUTO", " auto "])
def test_client_workers_auto(text, four_cores):
    assert parse_client_workers(text) == "auto"
    assert settings(ini={"llmperf_client_workers": text}).client_workers == "auto"
    assert settings(env={"LLMPERF_CLIENT_WORKERS": text}).client_workers == "auto"


def test_client_workers_a_number_is_an_int(four_cores):
    assert parse_client_workers("2") == 2
    assert settings(ini={"llmperf_client_workers": "2"}).client_workers == 2
    assert settings(env={"LLMPERF_CLIENT_WORKERS": " 2 "}).client_workers == 2
    # The CLI value arrives already parsed by argparse with the option's parse function.
    assert settings(cli={"client_workers": 2}, env={"LLMPERF_CLIENT_WORKERS": "3"}
                    ).client_workers == 2


@pytest.mark.parametrize("workers", [1, 4])
def test_client_workers_range_is_inclusive(workers, four_cores):
    assert settings(env={"LLMPERF_CLIENT_WORKERS": str(workers)}).client_workers == workers


@pytest.mark.parametrize("text", ["0", "two", "5", "-1", "2.5", ""])
def test_client_workers_parse_errors(text, four_cores):
    # What argparse calls for the command line, and resolve for ini and env.
    with pytest.raises(ValueError) as excinfo:
        parse_client_workers(text)
    assert str(excinfo.value) == CORES_RULE


def test_client_workers_limit_is_the_usable_cores(monkeypatch):
    monkeypatch.setattr(settings_mod, "usable_cores", lambda: 16)
    assert parse_client_workers("16") == 16
    with pytest.raises(ValueError) as excinfo:
        parse_client_workers("17")
    assert str(excinfo.value) == (
        "expected auto, a whole number from 1 to 16 (the cores this process may use), or "
        "ray[:N] (N workers on the Ray cluster)"
    )


@pytest.mark.parametrize("text", ["0", "two", "5"])
def test_client_workers_error_names_the_ini_key(text, four_cores):
    with pytest.raises(ValueError) as excinfo:
        settings(ini={"llmperf_client_workers": text})
    assert str(excinfo.value) == f"ini llmperf_client_workers={text!r}: {CORES_RULE}"


@pytest.mark.parametrize("text", ["0", "two", "5"])
def test_client_workers_error_names_the_environment_variable(text, four_cores):
    with pytest.raises(ValueError) as excinfo:
        settings(env={"LLMPERF_CLIENT_WORKERS": text})
    assert str(excinfo.value) == f"$LLMPERF_CLIENT_WORKERS={text!r}: {CORES_RULE}"


def test_client_workers_cli_value_hides_a_broken_ini_value(four_cores):
    assert settings(cli={"client_workers": 3}, ini={"llmperf_client_workers": "two"}
                    ).client_workers == 3


@pytest.mark.parametrize("text", ["0", "two", "5"])
def test_client_workers_refused_on_the_command_line(text, four_cores, pytester):
    # The plugin registers the flag with type=parse_client_workers, so argparse refuses it.
    with pytest.raises(pytest.UsageError) as excinfo:
        pytester.parseconfig("--llmperf-client-workers", text)
    assert "error: argument --llmperf-client-workers: " in str(excinfo.value)


@pytest.mark.parametrize("text", ["0", "two", "5"])
def test_client_workers_command_line_error_line(text, four_cores, pytester):
    with pytest.raises(pytest.UsageError) as excinfo:
        pytester.parseconfig("--llmperf-client-workers", text)
    assert f"error: argument --llmperf-client-workers: {CORES_RULE}\n" in str(excinfo.value)


def test_client_workers_on_the_command_line(four_cores, pytester):
    config = pytester.parseconfig("--llmperf-client-workers", "2")
    assert config.getoption("llmperf_client_workers") == 2
    config = pytester.parseconfig("--llmperf-client-workers", "auto")
    assert config.getoption("llmperf_client_workers") == "auto"


# ------------------------------------------------------------------ paired A/B options


@pytest.mark.parametrize(("env", "message"), [
    ({"LLMPERF_AB": "{max_num_seqs: 8}"},
     "$LLMPERF_AB='{max_num_seqs: 8}': not valid JSON (Expecting property name enclosed in double "
     "quotes: line 1 column 2 (char 1)); give a JSON object of Engine fields, e.g. "
     "'{\"max_num_seqs\": 8}' or '{\"python\": \"/opt/vllm-next/bin/python\"}'"),
    ({"LLMPERF_AB": '{"max_seqs": 8}'},
     "$LLMPERF_AB='{\"max_seqs\": 8}': unknown Engine field 'max_seqs' (did you mean "
     "'max_num_seqs'?); fields: "),
    ({"LLMPERF_AB": '{"python": "/no/such/python"}'},
     "$LLMPERF_AB='{\"python\": \"/no/such/python\"}': python '/no/such/python' does not "
     "exist; name the python of another vLLM install, e.g. /opt/vllm-next/bin/python"),
    ({"LLMPERF_AB": '{"tensor_parallel_size": 0}'},
     "$LLMPERF_AB='{\"tensor_parallel_size\": 0}': Engine(tensor_parallel_size=0): expected a "
     "whole number >= 1, or None for vLLM's default"),
    ({"LLMPERF_AB_PAIRS": "0"},
     "$LLMPERF_AB_PAIRS='0': expected a whole number of ABBA pairs, 1 or more (4 is a good start)"),
    ({"LLMPERF_AB_CONFIRM_PAIRS": "-1"},
     "$LLMPERF_AB_CONFIRM_PAIRS='-1': expected a whole number >= 0"),
    ({"LLMPERF_AB_TOLERANCE": "-0.1"},
     "$LLMPERF_AB_TOLERANCE='-0.1': expected a fraction above 0, such as 0.1 (B may be 1.1 times "
     "worse)"),
])
def test_bad_ab_options_get_one_line_naming_their_source(env, message):
    with pytest.raises(ValueError) as excinfo:
        settings(env=env)
    assert str(excinfo.value).startswith(message)


def test_a_python_without_vllm_is_refused_before_any_engine_starts():
    with pytest.raises(ValueError) as excinfo:
        settings(env={"LLMPERF_AB": '{"python": "/usr/bin/python3"}'})
    assert str(excinfo.value).endswith(
        "python '/usr/bin/python3' has no vLLM (it cannot import vllm); name the python of "
        "another vLLM install, e.g. /opt/vllm-next/bin/python")


def test_ab_overrides_from_the_ini():
    chosen = settings(ini={"llmperf_ab": '{"max_num_seqs": 8, "env": {"X": "1"}}',
                           "llmperf_ab_pairs": "6", "llmperf_ab_confirm_pairs": "0"})
    assert (chosen.ab, chosen.ab_pairs, chosen.ab_confirm_pairs) == (
        {"max_num_seqs": 8, "env": {"X": "1"}}, 6, 0)


def test_server_kind_is_auto_or_a_kind_and_only_for_an_endpoint():
    endpoint = {"LLMPERF_ENDPOINT": "http://127.0.0.1:8080"}
    assert settings(env={**endpoint, "LLMPERF_SERVER_KIND": "LlamaCpp"}).server_kind == "llamacpp"
    with pytest.raises(ValueError) as excinfo:
        settings(env={**endpoint, "LLMPERF_SERVER_KIND": "tgi"})
    assert str(excinfo.value) == ("$LLMPERF_SERVER_KIND='tgi': expected auto, vllm, sglang, "
                                  "llamacpp, openai")
    with pytest.raises(ValueError) as excinfo:
        settings(ini={"llmperf_server_kind": "sglang"})
    assert str(excinfo.value) == ("--llmperf-server-kind names what --llmperf-endpoint's server "
                                  "is; the engines the plugin starts are vLLM: drop it or give "
                                  "the endpoint")


# The flags that choose what a session does: each refused beside those it excludes, in one line
# that says what it does and what to drop (settings.EXCLUSIVE, settings.NEEDS).
MODE_CONFLICTS = [
    ({"check_args": True, "endpoint": "http://127.0.0.1:9"},
     "--llmperf-check-args checks the engines the plugin would start, and with "
     "--llmperf-endpoint it starts none: drop --llmperf-endpoint"),
    ({"check_baselines": True, "update_baselines": True},
     "--llmperf-check-baselines ends each test at its first measurement, measuring nothing: drop "
     "--llmperf-check-args and --llmperf-update-baselines"),
    ({"bisect": "a==1 a==2", "compare": "before"},
     "--llmperf-bisect runs its own A/B steps on engines it starts: drop --llmperf-ab, "
     "--llmperf-endpoint, --llmperf-compare, --llmperf-update-baselines and --llmperf-check-args"),
    ({"ab": {"max_num_seqs": 8}, "endpoint": "http://127.0.0.1:9"},
     "--llmperf-ab needs engines the plugin starts (side B is the test's engine with the "
     "overrides): drop --llmperf-endpoint"),
    ({"ab": {"max_num_seqs": 8}, "compare": "before"},
     "--llmperf-ab judges side B against side A: drop --llmperf-compare and "
     "--llmperf-update-baselines"),
    ({"ab_a": {"max_num_seqs": 4}},
     "--llmperf-ab-a makes side A of a paired A/B run; give side B's fields with --llmperf-ab "
     "too"),
]


@pytest.mark.parametrize(("cli", "message"), MODE_CONFLICTS)
def test_flags_that_exclude_each_other_are_refused_in_one_line(cli, message):
    with pytest.raises(ValueError) as excinfo:
        settings(cli=cli)
    assert str(excinfo.value) == message
