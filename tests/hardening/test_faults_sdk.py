"""Upstream faults as the official SDKs see them (issue 7, item 2), through a real mitmdump.

The raw scripted upstream of ``test_faults_e2e`` speaks OpenAI Chat; the anthropic and openai
(Responses) SDKs stream through Dragoman with ``dragoman_idle_timeout=1``. A connection reset
mid-stream and a stalled upstream must each surface as the SDK's own error for an in-stream error
event, carrying Dragoman's message (never a hang, a connection error or a silent success).
"""

from __future__ import annotations

import subprocess

import pytest

from e2e.conftest import ClientWorker
from e2e.conftest import Proxy
from e2e.conftest import client_python

from .rawupstream import RawUpstream
from .test_faults_e2e import scripts

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def worker():
    py = client_python()
    r = subprocess.run([py, "-c", "import anthropic, openai"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"the SDK client interpreter {py} lacks the anthropic/openai SDKs")
    w = ClientWorker(py)
    yield w
    w.stop()


@pytest.fixture(scope="module")
def upstream():
    with RawUpstream(scripts) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    p = Proxy("openai-chat", upstream, tmp_path_factory.mktemp("sdkfaults"), ["--set", "dragoman_idle_timeout=1"])
    yield p
    p.stop()


#: what each SDK gives for the in-stream error event: anthropic raises ``APIStatusError`` from the
#: iterator on ``event: error``; the openai SDK's Responses stream does not raise, it yields a typed
#: ``ResponseErrorEvent`` (then ``response.failed``), reported by sdk_client.py as "error-event"
EXPECTED = {"anthropic": {"APIStatusError"}, "openai-responses": {"error-event"}}


@pytest.mark.parametrize("sdk", ["anthropic", "openai-responses"])
@pytest.mark.parametrize(
    "fault, needle, max_s", [("reset", "mid-stream", 20.0), ("stall", "dragoman_idle_timeout", 20.0)]
)
def test_sdk_raises_its_api_error_for_upstream_faults(proxy, worker, sdk, fault, needle, max_s):
    res = worker.call(
        {
            "sdk": sdk,
            "base_url": proxy.base_url(sdk),
            "mode": "stream",
            "scenario": "text",
            "headers": {"x-fault": fault},
        }
    )
    print(f"\n{sdk} {fault}: {res.get('error_type')} after {res['total_s']:.2f} s: {str(res.get('message'))[:160]}")
    assert res["ok"] is False, res
    assert res["error_type"] in EXPECTED[sdk], res
    assert needle in str(res.get("message")) + str(res.get("body")), res
    assert res["first_delta_s"] is not None, "the text before the fault was delivered"
    # a liveness bound, not a speed check: well under the SDK's 30 s read timeout (set in sdk_client), so the
    # error came from Dragoman and not from the client giving up (a loaded CI machine took 5.1 s here)
    assert res["total_s"] < max_s, res
