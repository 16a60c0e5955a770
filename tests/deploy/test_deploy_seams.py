"""What the deploy files hand to the code: the CronJob names the node as the host (the downward
API's spec.nodeName, which hardware.host_name reads) and pulls its moving tag every night; the
image records the commit it was built from (a build argument, an OCI label, and the variable
session/provenance.py reads where there is no .git)."""

from __future__ import annotations

from pathlib import Path

import yaml

from pytest_llmperf.machine.hardware import HOST_ENV
from pytest_llmperf.session.provenance import COMMIT_ENV

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _container() -> dict:
    cronjob = yaml.safe_load((DEPLOY / "kubernetes" / "nightly-cronjob.yaml").read_text())
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return container


def test_the_cronjob_names_the_node_as_the_host_and_pulls_the_image_each_night():
    container = _container()
    env = {item["name"]: item for item in container["env"]}
    assert env[HOST_ENV]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert container.get("imagePullPolicy") == "Always" or "@sha256:" in container["image"]


def test_the_image_records_its_commit():
    lines = (DEPLOY / "docker" / "Dockerfile").read_text().splitlines()
    assert f"ARG {COMMIT_ENV}=unknown" in lines
    assert f"LABEL org.opencontainers.image.revision=${COMMIT_ENV}" in lines
    assert f"ENV {COMMIT_ENV}=${COMMIT_ENV}" in lines
