"""Dead letters (issue 4; openapi/openapi.yaml, tag dead-letters): GET
/v1/dead-letters with workflow and kind filters and cursor paging, each with
its last error and last HTTP status; POST /v1/dead-letters/{id}/redrive
delivers a dead callback again with fresh attempts and reruns a dead step's run
from that step (new generation, same payload); DELETE /v1/dead-letters/{id} is
204, then 404."""

import threading

from harness import TS_RE, Hang, Reply, StepScript, assert_error, cont, sql_quote, succeed, wait_until
from helpers_issue4 import dead_letter_list, q


def _of_run(dls, rid):
    return [d for d in dls if d["run_id"] == rid]


def _wait_dead(api, n, **params):
    return wait_until(lambda: (lambda l: l if len(l) >= n else None)(dead_letter_list(api, **params)),
                      timeout=20, message="%d dead letters (%r)" % (n, params))


class Sequence:
    """A webhook route answering from a list of Replies, then `then` forever."""

    def __init__(self, replies, then):
        self.replies = list(replies)
        self.then = then
        self.lock = threading.Lock()

    def set(self, replies, then):
        with self.lock:
            self.replies = list(replies)
            self.then = then

    def __call__(self, req):
        with self.lock:
            return self.replies.pop(0) if self.replies else self.then


def test_list_filters_by_workflow_and_kind_and_pages_with_a_cursor(api, webhook):
    webhook.route("/alpha", StepScript({0: Reply(500, body=b"alpha is down")}))
    webhook.route("/beta", StepScript({0: lambda req: succeed("fine") if req.field("payload") == "ok"
                                       else Reply(503, body=b"beta overloaded")}))
    webhook.route("/cb-bad", lambda req: Reply(400, body=b"callback refused"))
    api.put_workflow("alpha", webhook.url("/alpha"), max_attempts=1)
    api.put_workflow("beta", webhook.url("/beta"), max_attempts=2)
    alpha = [api.submit("alpha", run_id="a%d" % i)["run_id"] for i in range(3)]
    beta = [api.submit("beta", run_id="b%d" % i)["run_id"] for i in range(2)]
    cb_run = api.submit("beta", run_id="b-cb", input="ok", callback_url=webhook.url("/cb-bad"))["run_id"]
    for rid in alpha + beta + [cb_run]:
        api.wait_terminal(rid)

    everything = _wait_dead(api, 6)
    assert len(everything) == 6
    assert len({d["id"] for d in everything}) == 6
    for d in everything:
        assert {"id", "kind", "run_id", "workflow", "step", "attempts", "last_error",
                "last_http_status", "created_at"} <= set(d), d
        assert TS_RE.match(d["created_at"])

    got = dead_letter_list(api, workflow="alpha")
    assert sorted(d["run_id"] for d in got) == alpha
    for d in got:
        assert d["kind"] == "step" and d["workflow"] == "alpha" and d["step"] == 0
        assert d["attempts"] == 1
        assert d["last_http_status"] == 500
        assert "500" in d["last_error"] and "alpha is down" in d["last_error"]

    got = dead_letter_list(api, workflow="beta", kind="step")
    assert sorted(d["run_id"] for d in got) == beta
    for d in got:
        assert d["attempts"] == 2 and d["last_http_status"] == 503
        assert "503" in d["last_error"] and "beta overloaded" in d["last_error"]

    (cb,) = dead_letter_list(api, kind="callback")
    assert cb["run_id"] == cb_run and cb["workflow"] == "beta" and cb["kind"] == "callback"
    assert cb["last_http_status"] == 400 and "400" in cb["last_error"]
    assert dead_letter_list(api, workflow="alpha", kind="callback") == []
    assert len(dead_letter_list(api, kind="step")) == 5
    assert dead_letter_list(api, workflow="nobody") == []

    # paging: limit 2 walks 3 pages, newest first, no duplicates, null cursor at the end
    pages = []
    cursor = None
    while True:
        params = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        r = api.get("/v1/dead-letters", params=params)
        assert r.status == 200, r
        assert len(r.body["dead_letters"]) <= 2
        pages.append(r.body["dead_letters"])
        cursor = r.body["next_cursor"]
        if cursor is None:
            break
        assert len(pages) < 10
    assert [len(p) for p in pages] == [2, 2, 2]
    flat = [d["id"] for p in pages for d in p]
    assert flat == [d["id"] for d in everything]
    stamps = [d["created_at"] for p in pages for d in p]
    assert stamps == sorted(stamps, reverse=True)
    # filters and the cursor together
    r = api.get("/v1/dead-letters", params={"workflow": "alpha", "limit": 2})
    assert len(r.body["dead_letters"]) == 2 and r.body["next_cursor"]
    r2 = api.get("/v1/dead-letters", params={"workflow": "alpha", "limit": 2, "cursor": r.body["next_cursor"]})
    assert len(r2.body["dead_letters"]) == 1 and r2.body["next_cursor"] is None
    assert r2.body["dead_letters"][0]["workflow"] == "alpha"

    assert_error(api.get("/v1/dead-letters", params={"kind": "steps"}), 400, "invalid_argument", field="kind")
    assert_error(api.get("/v1/dead-letters", params={"limit": 0}), 400, "invalid_argument", field="limit")
    assert_error(api.get("/v1/dead-letters", params={"limit": "x"}), 400, "invalid_argument", field="limit")
    r = api.get("/v1/dead-letters", params={"cursor": "not-a-cursor"})
    assert_error(r, 400, "invalid_argument", field="cursor")


def test_redrive_of_a_dead_callback_delivers_it_again_with_fresh_attempts(api, webhook, sql):
    # the run's max_attempts (2) governs callback attempts: two 503s kill it;
    # after the redrive a 503 then a 200 acknowledge it, which needs fresh attempts
    cb = Sequence([Reply(503, body=b"receiver down"), Reply(503, body=b"receiver down")],
                  then=Reply(400, body=b"unexpected"))
    webhook.route("/cb", cb)
    webhook.route("/steps", StepScript({0: succeed({"ok": True})}))
    api.put_workflow("wf", webhook.url(), callback_url=webhook.url("/cb"), max_attempts=2)
    rid = api.submit("wf", run_id="cb-run")["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"

    (dl,) = _wait_dead(api, 1, kind="callback")
    assert dl["run_id"] == rid and dl["attempts"] == 2
    assert dl["last_http_status"] == 503 and "receiver down" in dl["last_error"]
    before = webhook.requests(path="/cb")
    assert len(before) == 2

    cb.set([Reply(503, body=b"still warming up")], then=Reply(200, body=b""))
    r = api.post("/v1/dead-letters/%s/redrive" % q(dl["id"]))
    assert r.status == 200, r
    assert r.body["kind"] == "callback"
    after = webhook.wait_requests(4, path="/cb", timeout=20)
    assert all(x.json["run_id"] == rid and x.json["status"] == "succeeded" and x.json["generation"] == 1
               for x in after)
    assert after[2].json == before[0].json, "the same callback is delivered again"
    # acknowledged: the callback job ends done, and no dead letter is left
    wait_until(lambda: sql("SELECT status FROM callback WHERE run_id = %s" % sql_quote(rid)) == [["done"]],
               timeout=10, message="callback acknowledged")
    assert dead_letter_list(api, kind="callback") == []
    assert len(webhook.requests(path="/cb")) == 4
    assert_error(api.post("/v1/dead-letters/%s/redrive" % q(dl["id"])), 404, "not_found")
    assert api.run(rid)["generation"] == 1, "redriving a callback does not rerun the run"


def test_redrive_of_a_dead_step_reruns_its_run_from_that_step(api, webhook):
    webhook.route("/steps", StepScript({
        0: cont({"carry": [1, 2]}),
        1: lambda req: Reply(500, body=b"step 1 broken") if req.field("generation") == 1
        else cont({"fixed": req.field("payload")}),
        2: lambda req: succeed(req.field("payload")),
    }))
    api.put_workflow("wf", webhook.url(), max_attempts=1)
    rid = api.submit("wf", run_id="step-run")["run_id"]
    run = api.wait_terminal(rid)
    assert run["status"] == "failed" and run["final_step"] == 1

    (dl,) = _wait_dead(api, 1, kind="step")
    assert dl["run_id"] == rid and dl["step"] == 1 and dl["last_http_status"] == 500
    assert "step 1 broken" in dl["last_error"]
    (dead_call,) = webhook.requests(run_id=rid, step=1)
    assert dl["id"] == dead_call.headers["webhook-id"]

    r = api.post("/v1/dead-letters/%s/redrive" % q(dl["id"]))
    assert r.status == 200, r
    assert r.body["kind"] == "step"
    run = api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["generation"] == 2
    assert run["result"] == {"fixed": {"carry": [1, 2]}}
    calls = webhook.requests(run_id=rid)
    assert [(c.field("generation"), c.step) for c in calls] == [(1, 0), (1, 1), (2, 1), (2, 2)]
    assert calls[2].field("payload") == calls[1].field("payload") == {"carry": [1, 2]}
    assert calls[2].headers["webhook-id"] != calls[1].headers["webhook-id"]
    hist = [(s["generation"], s["step"], s["result"]) for s in api.steps(rid)]
    assert hist == [(1, 0, "continue"), (1, 1, "transient_error"), (2, 1, "continue"), (2, 2, "succeed")]
    assert dead_letter_list(api) == []
    assert_error(api.post("/v1/dead-letters/%s/redrive" % q(dl["id"])), 404, "not_found")


def test_redrive_of_a_dead_step_whose_run_is_active_again_is_409(api, webhook):
    webhook.route("/steps", StepScript({0: lambda req: Reply(500, body=b"x") if req.field("generation") == 1
                                        else Hang(max_s=30)}))
    api.put_workflow("wf", webhook.url(), max_attempts=1, timeout_ms=30000)
    rid = api.submit("wf", run_id="busy")["run_id"]
    api.wait_terminal(rid)
    (dl,) = _wait_dead(api, 1)
    assert api.post("/v1/runs/busy/rerun", {"from_step": 0}).status == 201
    webhook.wait_requests(2, run_id=rid)
    assert_error(api.post("/v1/dead-letters/%s/redrive" % q(dl["id"])), 409, "run_active")
    assert [d["id"] for d in dead_letter_list(api)] == [dl["id"]], "a refused redrive keeps the dead letter"
    assert api.run(rid)["generation"] == 2


def test_delete_dead_letter_is_204_then_404(api, webhook):
    webhook.route("/steps", StepScript({0: Reply(500, body=b"gone")}))
    api.put_workflow("wf", webhook.url(), max_attempts=1)
    keep = api.submit("wf", run_id="keep")["run_id"]
    drop = api.submit("wf", run_id="drop")["run_id"]
    api.wait_terminal(keep)
    api.wait_terminal(drop)
    dls = _wait_dead(api, 2)
    (d,) = _of_run(dls, drop)
    r = api.delete("/v1/dead-letters/%s" % q(d["id"]))
    assert r.status == 204, r
    assert r.raw == b""
    assert_error(api.delete("/v1/dead-letters/%s" % q(d["id"])), 404, "not_found")
    assert_error(api.post("/v1/dead-letters/%s/redrive" % q(d["id"])), 404, "not_found")
    assert [x["run_id"] for x in dead_letter_list(api)] == [keep]
    run = api.run(drop)
    assert run["status"] == "failed" and run["generation"] == 1, "deleting a dead letter leaves its run alone"


def test_unknown_dead_letter_is_404(api):
    assert_error(api.post("/v1/dead-letters/nope/redrive"), 404, "not_found")
    assert_error(api.delete("/v1/dead-letters/nope"), 404, "not_found")
