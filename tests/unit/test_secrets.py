"""Which env and flag values are secrets, and how engine specs, command lines, log headers and
error lines hide them (pytest_llmperf/secrets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf import secrets
from pytest_llmperf.engines.process import engine_error, log_header, spawn
from pytest_llmperf.engines.spec import Engine
from pytest_llmperf.secrets import (
    MARKER,
    is_secret,
    parse_names,
    redact_args,
    redact_env,
    redact_text,
    secret_values,
)
from pytest_llmperf.session.provenance import engine_identity

# Every vLLM 0.32.0 flag and environment variable that holds TOKEN, KEY, SECRET, PASSWORD, AUTH
# or CREDENTIAL anywhere (argparse's `vllm serve` flags, vllm/envs.py), with the verdict.
VLLM_NAMES = {
    "--allow-credentials": True,  # a bool flag: its value (True) stays readable anyway
    "--api-key": True,
    "--dbo-decode-token-threshold": False,
    "--dbo-prefill-token-threshold": False,
    "--enable-prompt-tokens-details": False,
    "--enable-tokenizer-info-endpoint": False,
    "--hf-token": True,
    "--long-prefill-token-threshold": False,
    "--long-prefill-token-threshold-adaptive": False,
    "--max-num-batched-tokens": False,
    "--max-num-queued-tokens": False,
    "--max-num-scheduled-tokens": False,
    "--return-tokens-as-token-ids": False,
    "--skip-tokenizer-init": False,
    "--spec-tokens": False,
    "--ssl-keyfile": False,  # a path
    "--tokenizer": False,
    "--tokenizer-mode": False,
    "--tokenizer-revision": False,
    "--tokens-only": False,
    "--kv-cache-dtype": False,
    "S3_ACCESS_KEY_ID": True,
    "S3_SECRET_ACCESS_KEY": True,
    "VLLM_API_KEY": True,
    "VLLM_MAX_BAD_WORDS_TOTAL_TOKENS": False,
    "VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE": False,
    "VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD": False,
    "VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD": False,
    "VLLM_USE_FASTOKENS": False,
    "VLLM_CPU_KVCACHE_SPACE": False,  # KVCACHE is not KEY
    "VLLM_CPU_OMP_THREADS_BIND": False,
}
OTHER_SECRETS = ("HF_TOKEN", "hf_token", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD",
                 "GITHUB_TOKEN", "BASIC_AUTH", "GOOGLE_APPLICATION_CREDENTIALS", "api_key",
                 "client-secret")


@pytest.fixture(autouse=True)
def no_user_names():
    """The user's names are session-wide; each test starts and ends without them."""
    secrets.use_names(())
    yield
    secrets.use_names(())


@pytest.mark.parametrize("name", sorted(VLLM_NAMES))
def test_vllm_names(name):
    assert is_secret(name) is VLLM_NAMES[name]


@pytest.mark.parametrize("name", OTHER_SECRETS)
def test_common_secret_names(name):
    assert is_secret(name)


def test_user_names_match_whole_parts_anywhere():
    assert not is_secret("GITHUB_PAT")
    assert is_secret("GITHUB_PAT", extra=["pat"])
    assert is_secret("--license-file", extra=["LICENSE_FILE"])
    assert not is_secret("PATH", extra=["pat"]), "a part, not a substring"
    secrets.use_names(["MY_PAT"])
    assert is_secret("X_MY_PAT_VALUE") and not is_secret("MY_PATH")


def test_parse_names():
    assert parse_names(" MY_PAT, --license-file ,") == ("MY_PAT", "--license-file")
    assert parse_names("") == ()
    with pytest.raises(ValueError) as info:
        parse_names("MY_PAT,two words")
    assert str(info.value) == ("'two words' is not an environment variable or flag name; "
                               "expected names such as MY_PAT,--license-file separated by commas")


def test_redact_env_keeps_the_keys_and_bare_flags():
    env = {"HF_TOKEN": "hf_x", "VLLM_CPU_KVCACHE_SPACE": "4", "PORT": 1}
    assert redact_env(env) == {"HF_TOKEN": MARKER, "VLLM_CPU_KVCACHE_SPACE": "4", "PORT": 1}
    args = {"api-key": ["k1", "k2"], "disable-auth": True, "max-num-batched-tokens": 512,
            "kv-transfer-config": {"kv_connector": "x", "auth_token": "t0k"}}
    assert redact_env(args) == {"api-key": MARKER, "disable-auth": True,
                                "max-num-batched-tokens": 512,
                                "kv-transfer-config": {"kv_connector": "x", "auth_token": MARKER}}
    assert secret_values(args) == {"k1", "k2", "t0k"}


def test_redact_args():
    command = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m",
               "--max-num-batched-tokens", "512", "--api-key", "k1", "k2", "--hf-token=hf_x",
               "--no-enable-prefix-caching", "--host", "127.0.0.1"]
    assert redact_args(command) == [
        "python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m",
        "--max-num-batched-tokens", "512", "--api-key", MARKER, MARKER, f"--hf-token={MARKER}",
        "--no-enable-prefix-caching", "--host", "127.0.0.1"]


def test_redact_text_longest_value_first():
    assert redact_text("key abc123 then abc", ["abc", "abc123", ""]) == \
        f"key {MARKER} then {MARKER}"


SECRET_ENGINE = Engine(model="/models/m", max_num_seqs=8, env={"HF_TOKEN": "hf_planted_1",
                                                             "VLLM_CPU_KVCACHE_SPACE": "4"},
                       extra_args={"api-key": "sk-planted-2", "async-scheduling": True})


def test_the_spec_as_written_out():
    assert SECRET_ENGINE.label() == f"m seqs=8 extra_args=api-key:{MARKER},async-scheduling:True"
    assert repr(SECRET_ENGINE) == (
        "Engine(model='/models/m', max_num_seqs=8, extra_args={'api-key': '<redacted>', "
        "'async-scheduling': True}, env={'HF_TOKEN': '<redacted>', "
        "'VLLM_CPU_KVCACHE_SPACE': '4'})")
    assert SECRET_ENGINE.environment()["HF_TOKEN"] == "hf_planted_1", "the engine gets it"
    assert "sk-planted-2" in SECRET_ENGINE.server_args()


def test_the_recorded_engine_hides_secrets_and_ignores_which_secret():
    identity = engine_identity(SECRET_ENGINE, rootdir=Path("/models"))
    assert identity == {"model": "m", "max_num_seqs": 8,
                        "extra_args": {"api-key": MARKER, "async-scheduling": True},
                        "env": {"HF_TOKEN": MARKER, "VLLM_CPU_KVCACHE_SPACE": "4"}}
    rotated = SECRET_ENGINE.replace(env={"HF_TOKEN": "hf_rotated", "VLLM_CPU_KVCACHE_SPACE": "4"})
    assert engine_identity(rotated, Path("/models")) == identity, "a new token, the same engine"
    assert rotated.digest() != SECRET_ENGINE.digest(), "another engine process all the same"


def test_user_names_reach_the_recorded_engine():
    engine = Engine(model="m", env={"MY_PAT": "ghp_x"})
    assert engine_identity(engine, Path("."))["env"] == {"MY_PAT": "ghp_x"}
    secrets.use_names(["MY_PAT"])
    assert engine_identity(engine, Path("."))["env"] == {"MY_PAT": MARKER}


def test_the_engine_log_header(tmp_path):
    log = tmp_path / "engine.log"
    proc = spawn(["true", "--api-key", "sk-planted-2", "--config", '{"auth_token": "t0k"}'],
                 {"HF_TOKEN": "hf_planted_1", "VLLM_CPU_KVCACHE_SPACE": "4"}, log,
                 hidden={"t0k"})
    assert proc.wait(timeout=30) == 0
    # Shell-quoted, so it pastes; the marker stays bare where it replaced a whole argument.
    assert log.read_text() == (
        f"$ true --api-key {MARKER} --config '{{\"auth_token\": \"{MARKER}\"}}'\n"
        f"# env: HF_TOKEN={MARKER} VLLM_CPU_KVCACHE_SPACE=4\n")


def test_a_secret_of_the_env_is_hidden_wherever_it_is_in_the_header():
    assert log_header(["run", "--url", "https://u:hf_planted_1@host"],
                      {"HF_TOKEN": "hf_planted_1"}) == (
        f"$ run --url https://u:{MARKER}@host\n# env: HF_TOKEN={MARKER}\n")


def test_an_engine_error_line_hides_what_the_engine_logged(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("INFO non-default args: {'api_key': ['sk-planted-2']}\n"
                   "ValueError: bad token hf_planted_1 for /models/m\n")
    error = engine_error(SECRET_ENGINE, "exited with code 1", log)
    assert str(error) == (
        f"vLLM engine 'm seqs=8 extra_args=api-key:{MARKER},async-scheduling:True' exited "
        f"with code 1: ValueError: bad token {MARKER} for /models/m (full log: {log})")

