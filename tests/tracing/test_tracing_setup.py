"""``soklet_core.tracing_setup.configure_from_environment``: what the ``OTEL_*`` variables turn on, and what they are
refused for.

The refusals and the cases that stay off are checked in this process: none of them installs a provider. Every case
that installs one runs in a ``python -c`` subprocess, because the global tracer provider can be set once per
process and the rest of the suite must keep running with tracing off. Those cases export to a real OTLP/HTTP
receiver (:mod:`tests.tracing.otlp_receiver`) or to the console exporter, and read back what arrived.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from soklet_core import SokletError, tracing
from soklet_core.tracing_setup import (
    TracingSetupError,
    TracingSetupErrorReason,
    configure_from_environment,
)
from tests.tracing.otlp_receiver import OtlpReceiver

ROOT = Path(__file__).resolve().parent.parent.parent
#: A value a leak would show: an API key in the exporter's headers.
SECRET = "sk-live-9f3b1c7e5d2a4f60b8e1"
HEADERS = f"x-api-key={SECRET},authorization=Bearer%20{SECRET}"


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    """No provider of a test outlives it (none is installed in this process; this proves the reset is cheap)."""
    yield
    tracing.use_provider(None)
    assert tracing.tracer() is None


def _configure(environ: Mapping[str, str]) -> None:
    setup = configure_from_environment(environ)
    if setup is not None:  # pragma: no cover - a refusal was expected
        setup.shutdown()
        raise AssertionError("a provider was installed in the test process")


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_SERVICE_NAME": "quiet", "OTEL_EXPORTER_OTLP_HEADERS": HEADERS, "OTEL_TRACES_SAMPLER": "always_on"},
        {"OTEL_TRACES_EXPORTER": "", "OTEL_EXPORTER_OTLP_ENDPOINT": "  "},
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
        {"OTEL_TRACES_EXPORTER": " None ", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"},
        {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"},
        {"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
        # Disabled wins even over a value that would be refused.
        {"OTEL_SDK_DISABLED": "True", "OTEL_TRACES_EXPORTER": "zipkin", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
    ],
    ids=[
        "nothing",
        "no-exporter-no-endpoint",
        "empty-values",
        "none",
        "none-spaced",
        "disabled",
        "disabled-upper",
        "disabled-before-refusals",
    ],
)
def test_tracing_stays_off_unless_an_export_is_asked_for(environ: dict[str, str]) -> None:
    assert configure_from_environment(environ) is None
    assert tracing.tracer() is None


@pytest.mark.parametrize(
    ("environ", "reason", "variable"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, TracingSetupErrorReason.UNKNOWN_EXPORTER, "OTEL_TRACES_EXPORTER"),
        ({"OTEL_TRACES_EXPORTER": f"otlp,{SECRET}"}, TracingSetupErrorReason.UNKNOWN_EXPORTER, "OTEL_TRACES_EXPORTER"),
        ({"OTEL_TRACES_EXPORTER": "otlp,none"}, TracingSetupErrorReason.UNKNOWN_EXPORTER, "OTEL_TRACES_EXPORTER"),
        ({"OTEL_TRACES_EXPORTER": "otlp,"}, TracingSetupErrorReason.UNKNOWN_EXPORTER, "OTEL_TRACES_EXPORTER"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            TracingSetupErrorReason.UNSUPPORTED_PROTOCOL,
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": f"http/json-{SECRET}"},
            TracingSetupErrorReason.UNSUPPORTED_PROTOCOL,
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
        (
            # The traces variable is the one in effect: it is the one named.
            {
                "OTEL_TRACES_EXPORTER": "console,otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
            },
            TracingSetupErrorReason.UNSUPPORTED_PROTOCOL,
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        ),
    ],
    ids=["unknown", "unknown-secret", "none-beside-otlp", "empty-item", "grpc", "http-json", "traces-protocol-wins"],
)
def test_an_export_soklet_cannot_make_is_refused_naming_the_variable_not_its_value(
    environ: dict[str, str], reason: TracingSetupErrorReason, variable: str
) -> None:
    with pytest.raises(TracingSetupError) as caught:
        _configure({**environ, "OTEL_EXPORTER_OTLP_HEADERS": HEADERS})
    error = caught.value
    assert isinstance(error, SokletError)
    assert error.reason is reason
    assert error.variable == variable
    assert str(error) == f"{variable}: {reason.description}"
    for value in environ.values():
        if value not in ("otlp", "console,otlp", "http/protobuf"):
            assert value not in str(error)
    assert SECRET not in str(error)
    assert SECRET not in repr(error.args)
    assert tracing.tracer() is None


def test_the_refusal_pickles_and_keeps_only_known_names() -> None:
    error = TracingSetupError(TracingSetupErrorReason.SDK_REFUSED, variable="OTEL_TRACES_EXPORTER", detail="ValueError")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.reason, copy.variable, copy.detail) == (
        TracingSetupError,
        "OTEL_TRACES_EXPORTER: the OpenTelemetry SDK refused its OTEL_* settings (ValueError)",
        TracingSetupErrorReason.SDK_REFUSED,
        "OTEL_TRACES_EXPORTER",
        "ValueError",
    )
    # A name this module does not read, or a detail that is not a type name, is dropped rather than shown.
    odd = TracingSetupError(TracingSetupErrorReason.UNKNOWN_EXPORTER, variable=SECRET, detail=f"x {SECRET}")
    assert (odd.variable, odd.detail) == (None, None)
    assert SECRET not in str(odd)
    assert SECRET.encode() not in pickle.dumps(odd)


# -- the cases that install a provider: one subprocess each -----------------------------------------------------

#: Installs what the environment asks for, makes one soklet span (a child of a client's remote parent), shuts the
#: setup down and prints what it was; it also proves that after the shutdown soklet's spans left the provider.
SCRIPT = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from soklet_core import tracing
from soklet_core.tracing_setup import configure_from_environment

if "--global-first" in sys.argv:
    trace.set_tracer_provider(TracerProvider())  # an application's own, set before soklet's
setup = configure_from_environment()
if setup is None:
    print(json.dumps(None))
    sys.exit(0)
parent = tracing.remote_parent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
started = tracing.start_span("soklet.test", parent=parent, attributes={tracing.OUTCOME: "complete"})
assert started is not None
with tracing.use_span(started):
    with tracing.span("soklet.child", {tracing.ROUND: 1}):
        pass
started.end()
setup.shutdown()
print(json.dumps({"exporters": list(setup.exporters), "service": setup.service_name}))
"""


def _run(environ: Mapping[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env.update(environ)
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *arguments], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
    )


def test_otlp_exports_to_the_endpoint_with_its_headers_as_service_soklet_by_default() -> None:
    with OtlpReceiver() as receiver:
        done = _run({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_HEADERS": HEADERS})
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"exporters": ["otlp"], "service": "soklet"}
        # The shutdown flushed: both spans are there once the process has ended, without waiting.
        spans = {span.name: span for span in receiver.spans}
        assert set(spans) == {"soklet.test", "soklet.child"}
        # The SDK read the headers itself (they reach the collector), and nothing soklet printed shows them.
        assert receiver.headers[0]["x-api-key"] == SECRET
        assert SECRET not in done.stdout + done.stderr
    server, child = spans["soklet.test"], spans["soklet.child"]
    assert server.service_name == "soklet"
    assert server.scope == tracing.TRACER_NAME
    assert server.kind == "SERVER"
    assert server.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert server.parent_span_id == "b7ad6b7169203331"
    assert server.attributes[tracing.OUTCOME] == "complete"
    assert (child.trace_id, child.parent_span_id, child.kind) == (server.trace_id, server.span_id, "INTERNAL")
    assert child.attributes[tracing.ROUND] == 1


@pytest.mark.slow
def test_the_service_name_and_resource_come_from_the_standard_variables() -> None:
    with OtlpReceiver() as receiver:
        named = _run(
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.endpoint}/v1/traces",
                "OTEL_SERVICE_NAME": "soklet-eu-1",
                "OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=pod-7,deployment.environment=staging",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",  # for another signal: the traces variable is the one in effect
            }
        )
        assert named.returncode == 0, named.stderr
        assert json.loads(named.stdout)["service"] == "soklet-eu-1"
        resource = receiver.spans[0].resource
        assert resource["service.name"] == "soklet-eu-1"
        assert resource["service.instance.id"] == "pod-7"
        assert resource["deployment.environment"] == "staging"
    with OtlpReceiver() as receiver:
        # A service name in the resource attributes is kept: the default is only for a resource without one.
        attributed = _run(
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes",
            }
        )
        assert attributed.returncode == 0, attributed.stderr
        assert json.loads(attributed.stdout)["service"] == "from-attributes"
        assert receiver.spans[0].service_name == "from-attributes"


def test_console_writes_spans_to_standard_error_only() -> None:
    done = _run({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert done.returncode == 0, done.stderr
    # No OTLP exporter: the protocol variable does not concern it.
    assert json.loads(done.stdout) == {"exporters": ["console"], "service": "soklet"}
    assert '"name": "soklet.test"' in done.stderr
    assert '"service.name": "soklet"' in done.stderr
    assert "soklet.test" not in done.stdout


def test_a_comma_list_makes_both_exporters_each_once() -> None:
    with OtlpReceiver() as receiver:
        done = _run({"OTEL_TRACES_EXPORTER": "otlp, console,otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["exporters"] == ["otlp", "console"]
        assert len(receiver.spans) == 2
        assert done.stderr.count('"name": "soklet.test"') == 1


def test_the_sdk_reads_the_sampler() -> None:
    with OtlpReceiver() as receiver:
        done = _run({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_TRACES_SAMPLER": "always_off"})
        assert done.returncode == 0, done.stderr
        assert receiver.spans == []


def test_soklet_spans_follow_the_setup_even_when_the_global_provider_was_set_first() -> None:
    with OtlpReceiver() as receiver:
        done = _run({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}, "--global-first")
        assert done.returncode == 0, done.stderr
        assert {span.name for span in receiver.spans} == {"soklet.test", "soklet.child"}


def test_without_the_sdk_the_module_imports_and_an_export_asks_for_the_extra() -> None:
    # The SDK made unimportable in a fresh interpreter: what a server without the tracing extra sees.
    script = """
import sys
sys.modules["opentelemetry.sdk"] = None
from soklet_core.tracing_setup import TracingSetupError, configure_from_environment
assert configure_from_environment({}) is None
try:
    configure_from_environment({"OTEL_TRACES_EXPORTER": "console"})
except TracingSetupError as error:
    print(error.reason.value)
    print(error)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["sdk-missing", "install the tracing extra: pip install 'soklet[tracing]'"]
