"""The Kubernetes example (deploy/kubernetes): every manifest valid against the Kubernetes schemas kubernetes-validate
ships (strict: an unknown field is an error; offline: the schemas are in the package), and saying what
docs/operations.md says: three replicas of ``soklet serve --keyring-from-store`` with the KEK, the admin token and
the admin TLS files mounted 0400 from Secrets, the store URL from a Secret, readiness on the admin listener's
``/v1/ready`` and liveness on ``/v1/health``, a Service for the MCP port, and a CronJob that rotates with
``--if-older-than 30d``. Every option the manifests give soklet is one its ``--help`` lists, and their commands run
here (paths and ports replaced, ``$(VAR)`` expanded as Kubernetes does) on a real SQLite store: the server answers
both probes, the CronJob's rotation does nothing while the key is young."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml

from tests.server.support_admin import self_signed_certificate

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
#: The Kubernetes version the manifests are checked against: the newest whose schemas the validator ships.
KUBERNETES_VERSION = kubernetes_validate.latest_version()
#: A long option in soklet's help text.
OPTION = re.compile(r"--[a-z][a-z-]*")
SECRET_MODE = 0o400


def documents() -> dict[str, dict[str, Any]]:
    """Each manifest by kind (one document a file)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            assert document["kind"] not in found, path.name
            found[document["kind"]] = document
    return found


def test_the_example_has_a_deployment_a_service_and_a_cronjob() -> None:
    assert set(documents()) == {"Deployment", "Service", "CronJob"}


@pytest.mark.parametrize("kind", ["Deployment", "Service", "CronJob"])
def test_each_manifest_is_valid_against_the_kubernetes_schemas(kind: str) -> None:
    kubernetes_validate.validate(documents()[kind], KUBERNETES_VERSION, strict=True)


def test_the_validator_refuses_an_unknown_field_and_a_wrong_type() -> None:
    deployment = documents()["Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"]["periodSecond"] = 5
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    service = documents()["Service"]
    service["spec"]["ports"][0]["port"] = "eighty"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(service, KUBERNETES_VERSION, strict=True)


def test_the_command_line_validator_passes_the_files_offline() -> None:
    # What scripts/test runs; the schemas come from the package (no network is asked for).
    files = [str(path) for path in sorted(MANIFESTS.glob("*.yaml"))]
    result = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", *files],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("passed") == len(files)


def _pod(template: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = template["spec"]
    [container] = spec["containers"]
    return spec, container


def _secret_file(spec: dict[str, Any], container: dict[str, Any], path: str) -> str:
    """The Secret mounted (mode 0400) at ``path``'s folder in the container."""
    folder, name = path.rsplit("/", 1)
    [mount] = [mount for mount in container["volumeMounts"] if mount["mountPath"] == folder]
    assert mount["readOnly"] is True
    [volume] = [volume for volume in spec["volumes"] if volume["name"] == mount["name"]]
    secret = volume["secret"]
    assert secret["defaultMode"] == SECRET_MODE
    keys = {item["path"] for item in secret.get("items", [{"path": name}])}
    assert name in keys
    return str(secret["secretName"])


def _after(args: list[str], option: str) -> str:
    return args[args.index(option) + 1]


def test_the_deployment_serves_three_ready_instances_from_the_store() -> None:
    deployment = documents()["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    spec, container = _pod(deployment["spec"]["template"])
    args = container["args"]
    assert args[0] == "serve"
    assert "--keyring-from-store" in args
    assert _after(args, "--store") == "$(SOKLET_STORE)"
    env = {entry["name"]: entry for entry in container["env"]}
    assert env["SOKLET_STORE"]["valueFrom"]["secretKeyRef"]["name"] == "soklet-store"
    assert _secret_file(spec, container, _after(args, "--kek-file")) == "soklet-kek"
    assert _secret_file(spec, container, _after(args, "--admin-token-file")) == "soklet-admin-token"
    assert _secret_file(spec, container, _after(args, "--admin-tls-key")) == "soklet-admin-tls"
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["admin"] == int(_after(args, "--admin-port"))
    assert ports["mcp"] == int(_after(args, "--port"))
    readiness, liveness = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
    assert (readiness["path"], readiness["port"], readiness["scheme"]) == ("/v1/ready", "admin", "HTTPS")
    assert (liveness["path"], liveness["port"], liveness["scheme"]) == ("/v1/health", "admin", "HTTPS")
    # The probes carry no token: the two endpoints answer without one.
    assert "httpHeaders" not in readiness
    assert "httpHeaders" not in liveness
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]


def test_the_service_publishes_the_mcp_port_of_the_deployments_pods() -> None:
    found = documents()
    service, deployment = found["Service"], found["Deployment"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert [port["targetPort"] for port in service["spec"]["ports"]] == ["mcp"]


def test_the_cronjob_rotates_the_store_keyring_when_the_key_is_30_days_old() -> None:
    cronjob = documents()["CronJob"]
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    spec, container = _pod(cronjob["spec"]["jobTemplate"]["spec"]["template"])
    args = container["args"]
    assert args[:2] == ["keys", "rotate"]
    assert _after(args, "--store") == "$(SOKLET_STORE)"
    assert _after(args, "--if-older-than") == "30d"
    assert "--yes" in args
    assert _secret_file(spec, container, _after(args, "--kek-file")) == "soklet-kek"


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "command"), [("Deployment", ["serve"]), ("CronJob", ["keys", "rotate"])])
def test_every_option_given_to_soklet_is_one_it_knows(kind: str, command: list[str]) -> None:
    document = documents()[kind]
    template = (
        document["spec"]["template"] if kind == "Deployment" else document["spec"]["jobTemplate"]["spec"]["template"]
    )
    _, container = _pod(template)
    given = {arg for arg in container["args"] if arg.startswith("--")}
    result = subprocess.run(
        [sys.executable, "-m", "soklet_cli", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    known = set(OPTION.findall(result.stdout))
    assert given <= known, sorted(given - known)


def _store_with_a_keyring(folder: Path) -> tuple[str, Path]:
    """A SQLite store holding a fleet keyring wrapped under a new KEK file (0600): its URL and the KEK file."""
    kek = folder / "kek"
    store = f"sqlite:///{folder / 'store.db'}"
    for command in (
        ["kek", "generate", "--output", str(kek)],
        ["keys", "generate", "--store", store, "--kek-file", str(kek)],
    ):
        made = subprocess.run(
            [sys.executable, "-m", "soklet_cli", *command], capture_output=True, text=True, timeout=120, check=False
        )
        assert made.returncode == 0, made.stderr
    return store, kek


def _as_run_here(args: list[str], replacements: dict[str, str], environment: dict[str, str]) -> list[str]:
    """The container's args with ``$(VAR)`` expanded as Kubernetes does and each option's value replaced as given."""
    expanded = [environment.get(arg[2:-1], arg) if arg.startswith("$(") and arg.endswith(")") else arg for arg in args]
    return [replacements.get(expanded[index - 1], arg) if index else arg for index, arg in enumerate(expanded)]


@pytest.mark.slow
def test_the_cronjob_command_does_nothing_on_a_young_key(tmp_path: Path) -> None:
    store, kek = _store_with_a_keyring(tmp_path)
    _, container = _pod(documents()["CronJob"]["spec"]["jobTemplate"]["spec"]["template"])
    args = _as_run_here(container["args"], {"--kek-file": str(kek)}, {"SOKLET_STORE": store})
    result = subprocess.run(
        [sys.executable, "-m", "soklet_cli", *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert '"status": "skipped"' in result.stdout


@pytest.mark.slow
def test_the_deployment_command_serves_and_its_probes_answer(tmp_path: Path) -> None:
    store, kek = _store_with_a_keyring(tmp_path)
    token = tmp_path / "admin-token"
    token.write_text("ops:adminTestToken-deploy-1f2e3d\n")
    token.chmod(0o600)
    cert, key = self_signed_certificate(tmp_path)
    _, container = _pod(documents()["Deployment"]["spec"]["template"])
    replacements = {
        "--kek-file": str(kek),
        "--admin-token-file": str(token),
        "--admin-tls-cert": str(cert),
        "--admin-tls-key": str(key),
        "--host": "127.0.0.1",
        "--admin-host": "127.0.0.1",
        "--port": "0",
        "--admin-port": "0",
    }
    args = _as_run_here(container["args"], replacements, {"SOKLET_STORE": store, "POD_NAME": "soklet-5d8f7-x2k9q"})
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "soklet_cli", *args, "--json"], stdout=subprocess.PIPE, stderr=log, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("{"), (tmp_path / "serve.log").read_text()[-2000:]
        admin_url = json.loads(line)["admin_url"]
        probes = {"readinessProbe": {"status": "ready"}, "livenessProbe": {"status": "ok"}}
        with httpx.Client(verify=ssl.create_default_context(cafile=str(cert)), timeout=30) as http:
            for probe, expected in probes.items():
                get = container[probe]["httpGet"]
                assert get["scheme"] == "HTTPS"
                deadline = time.monotonic() + 60
                while (answer := http.get(admin_url + get["path"])).status_code != 200:
                    assert time.monotonic() < deadline, answer.text
                    time.sleep(0.1)
                assert answer.json() == expected
    finally:
        process.terminate()
        process.wait(30)
        log.close()
