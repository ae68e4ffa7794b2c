"""Memo (openapi/openapi.yaml, tag memo): run-scope /v1/runs/{id}/memo/{key}
and step-scope /v1/runs/{id}/steps/{n}/memo/{key}; GET {"value"} or 404, PUT
{"value"} 200, DELETE 204. The delivery token of a step request (memo.token)
authorises its own run's memos only; API tokens work too. Values up to 256
KiB."""

import pytest

from harness import Api, Reply, StepScript, assert_error, cont, succeed
from helpers_issue3 import delivery_api, memo_path

TOKEN = "memo-api-token-0123456789abcdef"
MAX = 256 * 1024


def _park(webhook, api, run_id="r1"):
    """Submits a run whose step 0 asks for step 1 ten minutes later, and
    returns (run_id, step-0 request) so the test holds its delivery token."""
    webhook.route("/steps", StepScript({0: cont("parked", delay_ms=600000)}))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", run_id=run_id)["run_id"]
    (req,) = webhook.wait_requests(1, run_id=rid)
    api.wait_status(rid, "scheduled")
    return rid, req


def _memo_crud(client, rid, step):
    path = memo_path(rid, "work/result", step)
    r = client.get(path)
    assert_error(r, 404, "not_found")
    r = client.put(path, {"value": {"paid": 42, "items": [1, 2]}})
    assert r.status == 200, r
    assert r.body == {"value": {"paid": 42, "items": [1, 2]}}
    r = client.get(path)
    assert r.status == 200 and r.body == {"value": {"paid": 42, "items": [1, 2]}}, r
    r = client.put(path, {"value": "overwritten"})
    assert r.status == 200 and r.body == {"value": "overwritten"}, r
    assert client.get(path).body == {"value": "overwritten"}
    r = client.delete(path)
    assert r.status == 204 and r.raw == b"", r
    assert_error(client.get(path), 404, "not_found")
    assert client.delete(path).status == 204, "DELETE answers 204 whether or not the memo existed"


# ---- CRUD and scopes --------------------------------------------------------------

def test_run_scope_memo_put_get_delete(api, webhook):
    rid, _ = _park(webhook, api)
    _memo_crud(api, rid, None)


def test_step_scope_memo_put_get_delete(api, webhook):
    rid, _ = _park(webhook, api)
    _memo_crud(api, rid, 0)
    _memo_crud(api, rid, 7)


def test_memo_null_and_scalar_values_round_trip(api, webhook):
    rid, _ = _park(webhook, api)
    for v in (None, 0, "", [], {}, "\u6f22\u5b57"):
        assert api.put(memo_path(rid, "v"), {"value": v}).status == 200
        r = api.get(memo_path(rid, "v"))
        assert r.status == 200 and r.body == {"value": v}, r


def test_memos_are_scoped_by_run_and_step(api, webhook):
    rid, _ = _park(webhook, api, "scoped")
    webhook.route("/steps", StepScript({0: cont("parked", delay_ms=600000)}))
    other = api.submit("wf", run_id="other")["run_id"]
    assert api.put(memo_path(rid, "k", 0), {"value": "step 0"}).status == 200
    assert_error(api.get(memo_path(rid, "k", 1)), 404, "not_found")
    assert_error(api.get(memo_path(rid, "k")), 404, "not_found")
    assert_error(api.get(memo_path(other, "k", 0)), 404, "not_found")

    assert api.put(memo_path(rid, "k"), {"value": "run"}).status == 200
    assert api.get(memo_path(rid, "k")).body == {"value": "run"}
    assert api.get(memo_path(rid, "k", 0)).body == {"value": "step 0"}
    assert_error(api.get(memo_path(other, "k")), 404, "not_found")

    assert api.delete(memo_path(rid, "k", 0)).status == 204
    assert api.get(memo_path(rid, "k")).body == {"value": "run"}, "deleting the step memo left the run memo"


def test_memo_keys_are_percent_encoded_path_segments(api, webhook):
    rid, _ = _park(webhook, api)
    for key in ("a/b:c", "caf\u00e9 \U0001F600", "x" * 512):
        assert api.put(memo_path(rid, key), {"value": key}).status == 200, key
        assert api.get(memo_path(rid, key)).body == {"value": key}
    assert_error(api.get(memo_path(rid, "x" * 513)), 400, "invalid_argument")
    assert_error(api.get("/v1/runs/%s/memo/%%FF" % rid), 400, "invalid_argument")


def test_memo_write_for_an_unknown_run_is_404(api):
    assert_error(api.put(memo_path("no-such-run", "k"), {"value": 1}), 404, "not_found")


# ---- size -------------------------------------------------------------------------

@pytest.mark.parametrize("step", [None, 0])
def test_memo_values_up_to_256_kib_are_accepted_and_larger_are_400(api, webhook, step):
    rid, _ = _park(webhook, api)
    exact = "x" * (MAX - 2)  # 256 KiB of canonical JSON with the quotes
    r = api.put(memo_path(rid, "big", step), {"value": exact})
    assert r.status == 200, r
    assert api.get(memo_path(rid, "big", step)).body == {"value": exact}
    r = api.put(memo_path(rid, "big", step), {"value": exact + "y"})
    assert_error(r, 400, "invalid_argument", "value")
    assert api.get(memo_path(rid, "big", step)).body == {"value": exact}, "a refused write changes nothing"


# ---- the delivery token -----------------------------------------------------------

@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_delivery_token_authorises_the_memos_of_its_own_run(api, service, webhook):
    rid, req = _park(webhook, api, "own")
    memo = req.json["memo"]
    assert memo["url"] == service.base_url + "/v1/runs/" + rid
    assert isinstance(memo["token"], str) and memo["token"]
    mine = Api(service.base_url, token=memo["token"])
    run_path = memo["url"][len(service.base_url):]
    for step in (None, 0, 3):
        path = run_path + ("/memo/k" if step is None else "/steps/%d/memo/k" % step)
        assert mine.put(path, {"value": step}).status == 200
        assert mine.get(path).body == {"value": step}
        assert api.get(path).body == {"value": step}, "an API token sees what the delivery token wrote"
        assert mine.delete(path).status == 204


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_delivery_token_is_403_on_another_runs_memo(api, service, webhook):
    a, req_a = _park(webhook, api, "run-a")
    b = api.submit("wf", run_id="run-b")["run_id"]
    webhook.wait_requests(1, run_id=b)
    assert api.put(memo_path(b, "k"), {"value": "b's"}).status == 200
    token_a = delivery_api(service.base_url, req_a)
    for step in (None, 0):
        assert_error(token_a.get(memo_path(b, "k", step)), 403, "forbidden")
        assert_error(token_a.put(memo_path(b, "k", step), {"value": "stolen"}), 403, "forbidden")
        assert_error(token_a.delete(memo_path(b, "k", step)), 403, "forbidden")
    assert_error(token_a.get(memo_path("no-such-run", "k")), 403, "forbidden")
    assert api.get(memo_path(b, "k")).body == {"value": "b's"}


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_memo_without_a_credential_is_401_when_api_tokens_are_set(api, service, webhook):
    rid, _ = _park(webhook, api)
    anon = Api(service.base_url)
    for step in (None, 0):
        assert_error(anon.get(memo_path(rid, "k", step)), 401, "unauthenticated")
        assert_error(anon.put(memo_path(rid, "k", step), {"value": 1}), 401, "unauthenticated")
        assert_error(anon.delete(memo_path(rid, "k", step)), 401, "unauthenticated")


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_api_token_works_on_memo_endpoints(api, service, webhook):
    rid, _ = _park(webhook, api)
    assert api.token == TOKEN
    _memo_crud(api, rid, None)
    _memo_crud(api, rid, 2)


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_delivery_token_is_401_on_endpoints_other_than_memo(api, service, webhook):
    rid, req = _park(webhook, api)
    tok = delivery_api(service.base_url, req)
    assert_error(tok.get("/v1/runs/" + rid), 401, "unauthenticated")
    assert_error(tok.get("/v1/runs/%s/steps" % rid), 401, "unauthenticated")
    assert_error(tok.post("/v1/runs/%s/cancel" % rid), 401, "unauthenticated")
    assert_error(tok.get("/v1/workflows"), 401, "unauthenticated")
    assert_error(tok.put("/v1/kv/k", {"value": 1}), 401, "unauthenticated")
    assert_error(tok.post("/v1/signals/k", {"payload": 1}), 401, "unauthenticated")
    assert api.run(rid)["status"] == "scheduled"


# ---- across attempts ---------------------------------------------------------------

@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_memo_written_on_attempt_1_is_read_back_on_attempt_2(api, service, webhook):
    seen = {}

    def step0(req):
        m = Api(service.base_url, token=req.json["memo"]["token"])
        run_memo = req.json["memo"]["url"][len(service.base_url):] + "/memo/expensive"
        step_memo = req.json["memo"]["url"][len(service.base_url):] + "/steps/0/memo/expensive"
        if req.attempt == 1:
            assert m.get(run_memo).status == 404
            assert m.put(run_memo, {"value": {"charge": "ch_1"}}).status == 200
            assert m.put(step_memo, {"value": "step-scoped"}).status == 200
            return Reply(503, body=b"crashed after the expensive work")
        got_run, got_step = m.get(run_memo), m.get(step_memo)
        seen["attempt2"] = (got_run.status, got_run.body, got_step.status, got_step.body)
        return succeed({"run": got_run.body["value"], "step": got_step.body["value"]})

    webhook.route("/steps", StepScript({0: step0}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded", run
    assert run["result"] == {"run": {"charge": "ch_1"}, "step": "step-scoped"}
    assert [r.attempt for r in webhook.requests(run_id=rid)] == [1, 2]
    reqs = webhook.requests(run_id=rid)
    assert reqs[0].json["memo"]["url"] == reqs[1].json["memo"]["url"]
    # Each attempt has a token of its own (it expires with the call), and each
    # reaches the run's memos.
    assert reqs[0].json["memo"]["token"] != reqs[1].json["memo"]["token"]
    assert [(s["attempt"], s["result"]) for s in api.steps(rid)] == [(1, "transient_error"), (2, "succeed")]
