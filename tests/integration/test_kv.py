"""KV: the REST endpoints (/v1/kv/{key} and the prefix listing;
openapi/openapi.yaml, tag kv) and the kv effects of submissions and step
outcomes, applied exactly as the settlement table of docs/webhook-protocol.md
says: with every acknowledged outcome, never on a step error, never when an
external cancel overrides."""

import threading

import pytest

from harness import TS_RE, Hang, Reply, StepScript, assert_error, cont, iso_to_epoch, succeed
from harness import sql_quote, wait_until
from helpers_issue3 import RowLock, kv_item, kv_put, kv_value, qkey, signal_outcome, wait_log, wait_signal

MAX = 256 * 1024


# ---- the endpoints -------------------------------------------------------------------

def test_kv_put_get_delete(api):
    assert kv_item(api, "app/orders/42") is None
    item = kv_put(api, "app/orders/42", {"state": "new"})
    assert set(item) == {"key", "value", "updated_at"}, item
    assert item["key"] == "app/orders/42" and item["value"] == {"state": "new"}
    assert TS_RE.match(item["updated_at"]), item
    assert kv_item(api, "app/orders/42") == item

    item2 = kv_put(api, "app/orders/42", {"state": "paid"})
    assert item2["value"] == {"state": "paid"}
    assert iso_to_epoch(item2["updated_at"]) >= iso_to_epoch(item["updated_at"])
    assert kv_item(api, "app/orders/42") == item2

    r = api.delete("/v1/kv/" + qkey("app/orders/42"))
    assert r.status == 204 and r.raw == b"", r
    assert_error(api.get("/v1/kv/" + qkey("app/orders/42")), 404, "not_found")
    assert api.delete("/v1/kv/" + qkey("app/orders/42")).status == 204, "DELETE of an absent key is 204"


def test_kv_keys_are_percent_encoded_path_segments(api):
    for key in ("a/b:c", "caf\u00e9/\U0001F600", "sp ace+%", "\u00e9" * 256):
        item = kv_put(api, key, key)
        assert item["key"] == key
        assert kv_item(api, key)["value"] == key
    for bad in ("x" * 513, "\u00e9" * 256 + "x"):
        assert_error(api.put("/v1/kv/" + qkey(bad), {"value": 1}), 400, "invalid_argument")
        assert_error(api.get("/v1/kv/" + qkey(bad)), 400, "invalid_argument")
    assert_error(api.put("/v1/kv/%FF", {"value": 1}), 400, "invalid_argument")
    assert_error(api.get("/v1/kv/%FF"), 400, "invalid_argument")


def test_empty_kv_key_is_400(api):
    assert_error(api.put("/v1/kv/", {"value": 1}), 400, "invalid_argument")
    assert_error(api.delete("/v1/kv/"), 400, "invalid_argument")


def test_kv_reserved_workflow_prefix_is_400_on_put_and_delete(api):
    assert_error(api.put("/v1/kv/" + qkey("workflow/x"), {"value": 1}), 400, "invalid_argument", "workflow/")
    assert_error(api.delete("/v1/kv/" + qkey("workflow/x")), 400, "invalid_argument", "workflow/")
    assert_error(api.get("/v1/kv/" + qkey("workflow/x")), 404, "not_found")  # readable, just absent
    # only the exact prefix is reserved
    assert kv_put(api, "workflows", 1)["key"] == "workflows"
    assert kv_put(api, "app/workflow/x", 1)["key"] == "app/workflow/x"


def test_kv_value_of_256_kib_is_accepted_and_larger_is_400(api):
    exact = "v" * (MAX - 2)
    assert kv_put(api, "big", exact)["value"] == exact
    assert_error(api.put("/v1/kv/big", {"value": exact + "v"}), 400, "invalid_argument", "value")
    assert kv_value(api, "big") == exact


def test_kv_put_needs_a_value_field(api):
    assert_error(api.put("/v1/kv/k", {}), 400, "invalid_argument", "value")
    assert_error(api.put("/v1/kv/k", {"value": 1, "extra": 2}), 400, "invalid_argument")
    assert kv_item(api, "k") is None


def _list(api, **params):
    r = api.get("/v1/kv", params=params)
    assert r.status == 200, r
    assert set(r.body) == {"items", "next_cursor"}, r
    for it in r.body["items"]:
        assert set(it) == {"key", "value", "updated_at"}, it
    return r.body


def test_kv_list_by_prefix_in_key_order_with_cursor_paging(api):
    keys = ["app/p/g", "app/p/a", "app/p/Z", "app/p/\u00e9", "app/p/b/1", "app/p/b", "app/p/0"]
    for i, k in enumerate(keys):
        kv_put(api, k, i)
    for k in ("app/p", "app/o/1", "app/q/1", "app/pp/1", "zzz", "APP/p/1"):
        kv_put(api, k, "outside")
    expected = sorted(keys, key=lambda k: k.encode())  # byte order of UTF-8 keys
    assert expected == ["app/p/0", "app/p/Z", "app/p/a", "app/p/b", "app/p/b/1", "app/p/g", "app/p/\u00e9"]

    pages, cursor = [], None
    while True:
        params = {"prefix": "app/p/", "limit": 3}
        if cursor:
            params["cursor"] = cursor
        body = _list(api, **params)
        pages.append([it["key"] for it in body["items"]])
        cursor = body["next_cursor"]
        if cursor is None:
            break
        assert len(pages) < 10, "paging does not end: %r" % pages
    assert pages == [expected[0:3], expected[3:6], expected[6:7]]
    body = _list(api, prefix="app/p/", limit=3)
    assert [it["value"] for it in body["items"]] == [keys.index(k) for k in expected[0:3]]

    body = _list(api, prefix="app/p/", limit=7)
    assert [it["key"] for it in body["items"]] == expected and body["next_cursor"] is None
    everything = _list(api, limit=1000)
    assert [it["key"] for it in everything["items"]] == sorted(everything_keys(keys), key=lambda k: k.encode())


def everything_keys(keys):
    return keys + ["app/p", "app/o/1", "app/q/1", "app/pp/1", "zzz", "APP/p/1"]


def test_kv_prefix_is_literal_not_a_pattern(api):
    for k in ("a_1", "ab1", "a%1", "a%b", "A_1", "a\\_1"):
        kv_put(api, k, k)
    assert [it["key"] for it in _list(api, prefix="a_")["items"]] == ["a_1"]
    assert [it["key"] for it in _list(api, prefix="a%")["items"]] == ["a%1", "a%b"]
    assert [it["key"] for it in _list(api, prefix="a\\")["items"]] == ["a\\_1"]


TOP = "\U0010FFFF"  # the highest code point, valid UTF-8 (F4 8F BF BF)


def test_kv_prefix_listing_includes_keys_with_the_highest_code_point_after_the_prefix(api):
    for k in ("p/" + TOP, "p/" + TOP + "x", "p/a", "q"):
        kv_put(api, k, 1)
    assert [it["key"] for it in _list(api, prefix="p/")["items"]] == ["p/a", "p/" + TOP, "p/" + TOP + "x"]


def test_kv_listing_without_prefix_includes_keys_starting_with_the_highest_code_point(api):
    for k in (TOP + "k", "a"):
        kv_put(api, k, 1)
    assert [it["key"] for it in _list(api)["items"]] == ["a", TOP + "k"]


def test_kv_list_rejects_bad_limit_and_cursor(api):
    for limit in ("0", "1001", "x"):
        assert_error(api.get("/v1/kv", params={"limit": limit}), 400, "invalid_argument", "limit")
    assert_error(api.get("/v1/kv", params={"cursor": "not a cursor"}), 400, "invalid_argument", "cursor")


# ---- submission effects ----------------------------------------------------------------

def test_submission_kv_effects_are_applied_with_the_run(api, webhook):
    kv_put(api, "app/tmp/42", "temporary")
    api.put_workflow("wf", webhook.url())
    run = api.submit("wf", run_id="order-42", delay_ms=600000,
                     kv={"put": {"app/orders/42": {"state": "new"}}, "delete": ["app/tmp/42"]})
    assert run["newly_submitted"] is True
    assert kv_value(api, "app/orders/42") == {"state": "new"}
    assert kv_item(api, "app/tmp/42") is None


def test_duplicate_submission_kv_effects_are_not_applied(api, webhook):
    api.put_workflow("wf", webhook.url())
    api.submit("wf", run_id="dup", input={"a": 1}, delay_ms=600000, kv={"put": {"app/dup": "first"}})
    kv_put(api, "app/keep", "kept")
    r = api.submit("wf", expect=200, run_id="dup", input={"a": 1}, delay_ms=600000,
                   kv={"put": {"app/dup": "second", "app/new": 1}, "delete": ["app/keep"]})
    assert r["newly_submitted"] is False
    assert kv_value(api, "app/dup") == "first"
    assert kv_item(api, "app/new") is None
    assert kv_value(api, "app/keep") == "kept"
    # nor after the run terminated
    assert api.post("/v1/runs/dup/cancel").status == 200
    r = api.submit("wf", expect=200, run_id="dup", input={"a": 1}, kv={"put": {"app/dup": "third"}})
    assert r["newly_submitted"] is False
    assert kv_value(api, "app/dup") == "first"


def test_rejected_submission_kv_effects_are_not_applied(api, webhook):
    api.put_workflow("wf", webhook.url())
    api.submit("wf", run_id="mm", input=1, delay_ms=600000)
    r = api.submit("wf", expect=None, run_id="mm", input=2, kv={"put": {"app/mismatch": 1}})
    assert_error(r, 409, "input_mismatch")
    r = api.submit("wf", expect=None, kv={"put": {"app/ok": 1, "workflow/x": 1}})
    assert_error(r, 400, "invalid_argument", "workflow/")
    r = api.submit("wf", expect=None, kv={"put": {"app/both": 1}, "delete": ["app/both"]})
    assert_error(r, 400, "invalid_argument")
    r = api.submit("wf", expect=None, kv={"put": {"app/huge": "h" * MAX}})
    assert_error(r, 400, "invalid_argument")
    r = api.submit("no-such-workflow", expect=None, kv={"put": {"app/nowf": 1}})
    assert_error(r, 404, "not_found")
    for k in ("app/mismatch", "app/ok", "app/both", "app/huge", "app/nowf"):
        assert kv_item(api, k) is None, k


# ---- step outcome effects -----------------------------------------------------------------

def _fx(name):
    return {"put": {"app/" + name: {"by": name}}, "delete": ["app/old"]}


OUTCOMES = {
    "continue": {0: cont(1, kv=_fx("continue")), 1: succeed(None)},
    "continue_delayed": {0: cont(1, delay_ms=10, kv=_fx("continue_delayed")), 1: succeed(None)},
    "continue_wait": {0: wait_signal("kv-wait", 200, kv=_fx("continue_wait")), 1: succeed(None)},
    "succeed": {0: succeed(1, kv=_fx("succeed"))},
    "fail": {0: Reply(200, {"outcome": "fail", "reason": "r", "kv": _fx("fail")})},
    "cancel": {0: Reply(200, {"outcome": "cancel", "reason": "r", "kv": _fx("cancel")})},
}
STATUS = {"continue": "succeeded", "continue_delayed": "succeeded", "continue_wait": "succeeded",
          "succeed": "succeeded", "fail": "failed", "cancel": "cancelled"}


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_kv_effects_are_applied_with_every_acknowledged_outcome(api, webhook, outcome):
    webhook.route("/steps", StepScript(OUTCOMES[outcome]))
    api.put_workflow("wf", webhook.url())
    kv_put(api, "app/old", 0)
    rid = api.submit("wf")["run_id"]
    run = api.wait_terminal(rid, timeout=15)
    assert run["status"] == STATUS[outcome], run
    assert kv_value(api, "app/" + outcome) == {"by": outcome}
    assert kv_item(api, "app/old") is None


def test_kv_effects_commit_with_the_settlement_before_the_next_step(api, webhook):
    seen = {}

    def step1(req):
        seen["kv"] = kv_value(api, "app/step0")
        return succeed(None)

    webhook.route("/steps", StepScript({0: cont(1, kv={"put": {"app/step0": "written"}}), 1: step1}))
    api.put_workflow("wf", webhook.url())
    assert api.wait_terminal(api.submit("wf")["run_id"])["status"] == "succeeded"
    assert seen["kv"] == "written", "step 1 ran before step 0's kv effects were visible"


def test_kv_effects_in_a_503_answer_are_not_applied(api, webhook):
    body_503 = {"outcome": "succeed", "result": 1, "kv": {"put": {"app/from-503": 1}, "delete": ["app/old"]}}

    def step0(req):
        if req.attempt == 1:
            return Reply(503, body_503)
        return succeed(2, kv={"put": {"app/from-attempt-2": 2}})

    webhook.route("/steps", StepScript({0: step0}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    kv_put(api, "app/old", "stays")
    run = api.wait_terminal(api.submit("wf")["run_id"])
    assert run["status"] == "succeeded" and run["result"] == 2, run
    assert kv_item(api, "app/from-503") is None
    assert kv_value(api, "app/old") == "stays"
    assert kv_value(api, "app/from-attempt-2") == 2


def test_kv_effects_of_a_step_error_on_the_last_attempt_are_not_applied(api, webhook):
    webhook.route("/steps", StepScript({0: Reply(500, {"outcome": "succeed", "result": 1,
                                                       "kv": {"put": {"app/from-500": 1}}})}))
    api.put_workflow("wf", webhook.url(), max_attempts=2)
    run = api.wait_terminal(api.submit("wf")["run_id"])
    assert run["status"] == "failed" and run["error_kind"] == "transient", run
    assert kv_item(api, "app/from-500") is None


@pytest.mark.parametrize("bad", [
    {"outcome": "succeed", "result": 1, "bogus": True, "kv": {"put": {"app/invalid": 1}}},
    {"outcome": "succeed", "result": 1, "kv": {"put": {"workflow/x": 1, "app/invalid": 1}}},
    {"outcome": "succeed", "result": 1, "kv": {"put": {"app/invalid": 1}, "delete": ["app/invalid"]}},
    {"outcome": "continue", "payload": 1, "delay_ms": 10,
     "wait_for_signal": {"correlation_key": "k", "timeout_ms": 10}, "kv": {"put": {"app/invalid": 1}}},
    {"outcome": "nope", "kv": {"put": {"app/invalid": 1}}},
], ids=["unknown-field", "reserved-key", "put-and-delete", "delay-and-wait", "unknown-outcome"])
def test_kv_effects_of_an_invalid_200_outcome_are_not_applied(api, webhook, bad):
    webhook.route("/steps", StepScript({0: Reply(200, bad)}))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    kv_put(api, "app/old", "stays")
    run = api.wait_terminal(api.submit("wf")["run_id"])
    assert run["status"] == "failed" and run["error_kind"] == "permanent", run
    assert run["error"].startswith("invalid step response"), run["error"]
    assert kv_item(api, "app/invalid") is None
    assert kv_value(api, "app/old") == "stays"


def test_kv_effects_of_a_rejected_second_waiter_are_not_applied(api, webhook):
    webhook.route("/steps", StepScript({
        0: lambda req: wait_signal("busy-key", 60000, kv={"put": {"app/waiter-" + req.run_id: 1}}),
        1: succeed(None)}))
    api.put_workflow("wf", webhook.url())
    first = api.submit("wf", run_id="first")["run_id"]
    api.wait_status(first, "waiting")
    second = api.submit("wf", run_id="second")["run_id"]
    run = api.wait_terminal(second)
    assert run["status"] == "failed" and "already registered" in run["error"], run
    assert kv_value(api, "app/waiter-first") == 1
    assert kv_item(api, "app/waiter-second") is None
    assert signal_outcome(api, "busy-key", None) == "delivered"
    assert api.wait_terminal(first)["status"] == "succeeded"


def test_kv_effects_are_discarded_when_an_external_cancel_aborts_the_call(api, webhook):
    release = threading.Event()
    webhook.route("/steps", StepScript({0: Hang(release=release, then=succeed(1, kv={"put": {"app/late": 1}}))}))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    rid = api.submit("wf")["run_id"]
    (req,) = webhook.wait_requests(1, run_id=rid)
    r = api.post("/v1/runs/%s/cancel" % rid)
    assert r.status == 202, r
    assert req.disconnected.wait(5), "the call was not aborted"
    release.set()
    run = api.wait_terminal(rid)
    assert run["status"] == "cancelled" and run["error"] is None and run["error_kind"] is None, run
    assert kv_item(api, "app/late") is None


def test_kv_effects_are_discarded_when_the_answer_comes_after_an_external_cancel(api, service, webhook):
    # The webhook records the cancel itself (202, committed) and answers at
    # once with a kv effect: whether the answer reaches the service before the
    # abort or not, the cancel was recorded first, so the run ends cancelled
    # with error null and the effect is discarded.
    n = 8
    cancels = {}

    def step0(req):
        cancels[req.run_id] = api.post("/v1/runs/%s/cancel" % req.run_id)
        return succeed("too late", kv={"put": {"app/late/" + req.run_id: 1}})

    webhook.route("/steps", StepScript({0: step0}))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000, max_attempts=3)
    rids = [api.submit("wf", run_id="race-%d" % i)["run_id"] for i in range(n)]
    for rid in rids:
        run = api.wait_terminal(rid)
        # The run can end (the cancel aborts the call) before the webhook's own
        # POST cancel has returned to it: wait for that response too.
        wait_until(lambda: rid in cancels, timeout=10, message="the cancel response of " + rid)
        assert cancels[rid].status == 202 and cancels[rid].body["status"] == "cancelling", cancels[rid]
        assert run["status"] == "cancelled", run
        assert run["error"] is None and run["error_kind"] is None, run
        assert run["result"] is None
        assert kv_item(api, "app/late/" + rid) is None, "%s: kv applied despite the cancel" % rid
        assert [s["result"] for s in api.steps(rid)] == ["cancelled"]
        assert len(webhook.requests(run_id=rid)) == 1
    assert _list(api, prefix="app/late/")["items"] == []


def _answer_with_cancel_recorded_first(service, db, webhook, answer):
    """Makes the service receive `answer` to step 0 after a cancel of the run
    was recorded, deterministically: a psql session holds the run's row lock;
    POST cancel queues on it first, then the webhook answers and the
    settlement queues second; when the lock goes the cancel commits before
    the settlement runs. Returns (run_id, cancel response)."""
    api = service.api
    release = threading.Event()
    webhook.route("/steps", StepScript({0: Hang(release=release, then=answer, max_s=30)}))
    api.put_workflow("wf", webhook.url(), timeout_ms=30000)
    rid = api.submit("wf")["run_id"]
    webhook.wait_requests(1, run_id=rid)
    out = {}
    lock = RowLock(db, "SELECT 1 FROM run WHERE run_id = %s FOR UPDATE" % sql_quote(rid))
    try:
        t = threading.Thread(target=lambda: out.update(r=api.post("/v1/runs/%s/cancel" % rid)), daemon=True)
        t.start()
        wait_until(lambda: lock.blocked_backends() >= 1, timeout=10, message="the cancel waiting on the lock")
        release.set()
        wait_log(service, r"call done kind=step run_id=%s \S+ step=0 attempt=1 http_status=200 " % rid)
        wait_until(lambda: lock.blocked_backends() >= 2, timeout=10, message="the settlement queued behind the cancel")
    finally:
        lock.release(terminate_others=False)
    t.join(10)
    return rid, out.get("r")


@pytest.mark.service_env(HOOKFLOW_LEASE_MS="6000")
def test_kv_effects_of_an_answer_settled_after_a_recorded_cancel_are_discarded(service, db, webhook):
    api = service.api
    rid, r = _answer_with_cancel_recorded_first(
        service, db, webhook, succeed("too late", kv={"put": {"app/after-cancel": 1}}))
    assert r is not None and r.status == 202 and r.body["status"] == "cancelling", r
    run = api.wait_terminal(rid)
    assert run["status"] == "cancelled", run
    assert run["error"] is None and run["error_kind"] is None and run["result"] is None, run
    assert kv_item(api, "app/after-cancel") is None
    assert [s["result"] for s in api.steps(rid)] == ["cancelled"]


@pytest.mark.service_env(HOOKFLOW_LEASE_MS="6000")
def test_kv_effects_of_the_webhooks_own_cancel_are_applied_even_after_an_external_cancel(service, db, webhook):
    # The runner's Cancel wins over an external cancel and keeps its effects.
    api = service.api
    answer = Reply(200, {"outcome": "cancel", "reason": "own reason", "kv": {"put": {"app/own-cancel": 1}}})
    rid, r = _answer_with_cancel_recorded_first(service, db, webhook, answer)
    assert r is not None and r.status == 202, r
    run = api.wait_terminal(rid)
    assert run["status"] == "cancelled", run
    assert run["error"] == "own reason", run
    assert kv_value(api, "app/own-cancel") == 1
    assert [s["result"] for s in api.steps(rid)] == ["cancel"]
