"""`hookflow check-webhook URL` (issue 18, item 6; README "Checking a
webhook"), run as a user runs it: the real binary against real webhook
servers. The example webhooks of examples/ pass every item; deliberately
broken webhooks fail exactly the items they break (accepting forged
requests, answering garbage, answering late, refusing unknown fields,
redoing memoized work, calling a memo outage permanent, not classifying an
error); the requests are hookflow's step requests; it exits 3 when the
webhook cannot be reached, 2 on bad usage, and never talks to hookflow."""

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from harness import (Reply, cont, fail, free_port, iso_to_epoch, new_secret, verify_signature,
                     wait_until)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ITEMS = ["valid-answer", "deadline", "bad-signature", "stale-timestamp", "missing-signature",
         "unknown-fields", "same-webhook-id", "memo-reuse", "memo-outage", "error-classification"]
STEP_FIELDS = {"run_id", "workflow", "step", "attempt", "max_attempts", "generation", "payload",
               "headers", "concurrency_key", "deadline", "memo"}


def _env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("HOOKFLOW_") and k.lower() not in
            ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}


def check(binary, url, *args, timeout=120):
    """Runs `hookflow check-webhook URL ARGS...`; returns the CompletedProcess."""
    return subprocess.run([binary, "check-webhook", url] + list(args), capture_output=True,
                          text=True, env=_env(), timeout=timeout)


def check_json(binary, url, *args):
    """check-webhook --json: (exit code, {item id: (status, detail)}, report)."""
    r = check(binary, url, "--json", *args)
    assert r.stdout, "no report; stderr: %s" % r.stderr
    report = json.loads(r.stdout)
    assert [i["id"] for i in report["items"]] == ITEMS
    items = {i["id"]: (i["status"], i["detail"]) for i in report["items"]}
    assert report["passed"] == sum(s == "pass" for s, _ in items.values())
    assert report["failed"] == sum(s == "fail" for s, _ in items.values())
    assert report["skipped"] == sum(s == "skip" for s, _ in items.values())
    return r.returncode, items, report


def statuses(items):
    return {k: v[0] for k, v in items.items()}


def signed_ok(secret, req, tolerance=300):
    """What a production webhook checks: a fresh timestamp and a valid signature."""
    try:
        ts = int(req.headers.get("webhook-timestamp", ""))
    except ValueError:
        return False
    return abs(time.time() - ts) <= tolerance and verify_signature(secret, req.headers, req.body)


def refuse():
    return Reply(401, json_body={"error": {"message": "bad signature", "retryable": False}})


class Memo:
    """The memo of a step request, called as a webhook does (no proxy)."""

    def __init__(self, req):
        self.base = req.json["memo"]["url"] + "/memo/"
        self.auth = "Bearer " + req.json["memo"]["token"]
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(self, method, key, value=None):
        data = None if value is None else json.dumps({"value": value}).encode()
        r = urllib.request.Request(self.base + urllib.parse.quote(key, safe=""), data=data,
                                   method=method, headers={"Authorization": self.auth,
                                                           "Content-Type": "application/json"})
        try:
            with self.opener.open(r, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, None


# ---- the examples ------------------------------------------------------------

def _start_example(cmd, secret, port, log):
    env = _env()
    env.update(WEBHOOK_SECRET=secret, WEBHOOK_PORT=str(port))
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)

    def up():
        if proc.poll() is not None:
            raise AssertionError("the example exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    wait_until(up, timeout=15, message="the example webhook on port %d" % port)
    return proc


# The node example needs @hookflow/sdk built and linked (npm ci, tsc), which
# `make examples-test` does before it runs check-webhook against both examples
# (examples/test-examples.sh); here, without npm, the python one.
@pytest.mark.parametrize("example", ["python"])
def test_the_examples_pass_every_item(hookflow_bin, example, tmp_path):
    cmd = {"python": ["/usr/bin/python3", os.path.join(REPO, "examples/python/webhook.py")]}[example]
    secret, port = new_secret(24), free_port()
    with open(tmp_path / "webhook.log", "wb") as log:
        proc = _start_example(cmd, secret, port, log)
        try:
            url = "http://127.0.0.1:%d/steps" % port
            code, items, report = check_json(hookflow_bin, url, "--secret", secret, "--error-step", "9")
            r = check(hookflow_bin, url, "--secret", secret, "--error-step", "9")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert code == 0, items
    assert statuses(items) == {i: "pass" for i in ITEMS}, items
    assert report["signed"] is True and report["timeout_ms"] == 30000
    assert items["memo-reuse"][1] == "delivery 2 read quote back from the memo and wrote nothing again"
    assert "retryable: true" in items["memo-outage"][1]
    assert items["error-classification"][1].startswith('answered fail ("unexpected step 9")')
    # The table for people: one aligned line per item, then the counts.
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "check-webhook " + url
    head = lines.index("RESULT  ITEM                  DETAIL")
    for i, item in enumerate(ITEMS):
        assert lines[head + 1 + i].startswith("PASS    %-22s" % item), lines[head + 1 + i]
    assert lines[-1] == "10 passed, 0 failed, 0 skipped"
    log_text = (tmp_path / "webhook.log").read_text()
    # Two checks, each: valid, unknown-fields and the first redelivery computed
    # the quote; the second redelivery found it in the memo.
    assert log_text.count("quote computed") == 6
    assert log_text.count("quote found in the memo") == 2


# ---- the requests ------------------------------------------------------------------

def test_the_requests_are_hookflows_step_requests(hookflow_bin, webhook):
    secret = new_secret()
    webhook.route("/steps", lambda req: cont({"seen": req.field("step")}))
    code, items, _ = check_json(hookflow_bin, webhook.url("/steps"), "--secret", secret,
                                "--step", "4", "--payload", '{"order": 42}',
                                "--headers", '{"tenant": "acme"}', "--workflow", "orders",
                                "--timeout-ms", "7000")
    reqs = webhook.requests(path="/steps")
    for req in reqs:
        assert req.method == "POST" and req.headers["content-type"] == "application/json"
        assert req.headers["user-agent"].startswith("hookflow/")
    valid = [r for r in reqs if r.run_id.endswith("-valid")]
    assert len(valid) == 1
    v = valid[0]
    assert signed_ok(secret, v)
    assert set(v.json) == STEP_FIELDS
    assert (v.json["workflow"], v.json["step"], v.json["attempt"], v.json["max_attempts"],
            v.json["generation"]) == ("orders", 4, 1, 3, 1)
    assert v.json["payload"] == {"order": 42} and v.json["headers"] == {"tenant": "acme"}
    assert v.json["concurrency_key"] is None
    assert abs(time.time() + 7 - iso_to_epoch(v.json["deadline"])) < 5
    assert v.json["memo"]["url"].endswith("/v1/runs/" + v.run_id)
    assert v.json["memo"]["token"].startswith("hf1.")
    assert len(v.headers["webhook-id"]) == 32

    bad = [r for r in reqs if r.run_id.endswith("-bad-signature")][0]
    assert bad.headers.get("webhook-signature") and not verify_signature(secret, bad.headers, bad.body)
    stale = [r for r in reqs if r.run_id.endswith("-stale-timestamp")][0]
    assert verify_signature(secret, stale.headers, stale.body)
    assert abs(time.time() - 600 - int(stale.headers["webhook-timestamp"])) < 30
    nosig = [r for r in reqs if r.run_id.endswith("-missing-signature")][0]
    assert "webhook-signature" not in nosig.headers and "webhook-id" in nosig.headers
    unknown = [r for r in reqs if r.run_id.endswith("-unknown-fields")][0]
    assert signed_ok(secret, unknown)
    assert set(unknown.json) == STEP_FIELDS | {"x_check_webhook_unknown"}
    assert "x_check_webhook_unknown" in unknown.json["memo"]
    redelivery = [r for r in reqs if r.run_id.endswith("-redelivery")]
    assert [r.attempt for r in redelivery] == [1, 2]
    assert redelivery[0].headers["webhook-id"] == redelivery[1].headers["webhook-id"]
    assert all(signed_ok(secret, r) for r in redelivery)
    # The webhook used no memo and was given no failing input: those are skipped.
    assert code == 1 and statuses(items) == {
        "valid-answer": "pass", "deadline": "pass", "bad-signature": "fail",
        "stale-timestamp": "fail", "missing-signature": "fail", "unknown-fields": "pass",
        "same-webhook-id": "pass", "memo-reuse": "skip", "memo-outage": "skip",
        "error-classification": "skip"}


# ---- broken webhooks fail exactly what they break --------------------------------

def test_a_webhook_that_accepts_forged_requests_fails_the_signature_items(hookflow_bin, webhook):
    webhook.route("/steps", lambda req: cont({"ok": True}))
    code, items, _ = check_json(hookflow_bin, webhook.url("/steps"), "--secret", new_secret())
    assert code == 1
    assert {k for k, (s, _) in items.items() if s == "fail"} == {
        "bad-signature", "stale-timestamp", "missing-signature"}
    assert items["bad-signature"][1] == "signed with another secret: accepted with HTTP 200, and perhaps acted on"
    assert statuses(items)["valid-answer"] == "pass"


def test_a_webhook_that_answers_garbage_fails_the_answer_item(hookflow_bin, webhook):
    secret = new_secret()
    webhook.route("/steps", lambda req: Reply(200, body=b"<html>ok</html>") if signed_ok(secret, req)
                  else refuse())
    code, items, _ = check_json(hookflow_bin, webhook.url("/steps"), "--secret", secret)
    assert code == 1
    assert statuses(items) == {
        "valid-answer": "fail", "deadline": "pass", "bad-signature": "pass",
        "stale-timestamp": "pass", "missing-signature": "pass", "unknown-fields": "skip",
        "same-webhook-id": "skip", "memo-reuse": "skip", "memo-outage": "skip",
        "error-classification": "skip"}
    assert items["valid-answer"][1].startswith("invalid step response: ")
    assert items["bad-signature"][1] == "signed with another secret: refused with HTTP 401"


def test_a_slow_webhook_fails_the_deadline_item(hookflow_bin, webhook):
    secret = new_secret()
    webhook.route("/steps", lambda req: Reply(200, json_body={"outcome": "succeed", "result": 1},
                                              delay=0.6) if signed_ok(secret, req) else refuse())
    code, items, _ = check_json(hookflow_bin, webhook.url("/steps"), "--secret", secret,
                                "--timeout-ms", "300")
    assert code == 1
    assert {k for k, (s, _) in items.items() if s == "fail"} == {"deadline"}
    assert "the deadline is 300 ms (hookflow would have aborted the call" in items["deadline"][1]
    assert statuses(items)["valid-answer"] == "pass"


def test_a_webhook_that_refuses_unknown_fields_fails_that_item(hookflow_bin, webhook):
    secret = new_secret()

    def strict(req):
        if not signed_ok(secret, req):
            return refuse()
        if set(req.json) - STEP_FIELDS or set(req.json["memo"]) - {"url", "token"}:
            return Reply(400, json_body={"error": {"message": "unknown field", "retryable": False}})
        return cont(None)
    webhook.route("/steps", strict)
    code, items, _ = check_json(hookflow_bin, webhook.url("/steps"), "--secret", secret)
    assert code == 1
    assert {k for k, (s, _) in items.items() if s == "fail"} == {"unknown-fields"}
    assert items["unknown-fields"][1].startswith("with unknown fields at the top and in memo: HTTP 400")


def test_a_webhook_that_redoes_memoized_work_and_calls_an_outage_permanent(hookflow_bin, webhook):
    secret = new_secret()

    def careless(req):
        if not signed_ok(secret, req):
            return refuse()
        status, _ = Memo(req).call("PUT", "result", {"computed": req.attempt})
        if status != 200:
            return Reply(400, json_body={"error": {"message": "memo failed", "retryable": False}})
        return cont({"done": True})
    webhook.route("/steps", careless)
    code, items, _ = check_json(hookflow_bin, webhook.url("/steps"), "--secret", secret)
    assert code == 1
    assert {k for k, (s, _) in items.items() if s == "fail"} == {"memo-reuse", "memo-outage"}
    assert items["memo-reuse"][1] == \
        "delivery 2 wrote result again: the work delivery 1 memoized was done again"
    assert "hookflow would fail the run" in items["memo-outage"][1]


def test_a_webhook_that_reuses_its_memo_passes_those_items(hookflow_bin, webhook):
    secret = new_secret()

    def careful(req):
        if not signed_ok(secret, req):
            return refuse()
        memo = Memo(req)
        status, got = memo.call("GET", "result")
        if status == 404:
            status, _ = memo.call("PUT", "result", {"computed": True})
        if status != 200:
            return Reply(503, body=b"memo down, try later")  # transient by its status
        return cont({"done": True})
    webhook.route("/steps", careful)
    code, items, _ = check_json(hookflow_bin, webhook.url("/steps"), "--secret", secret)
    assert code == 0, items
    assert statuses(items)["memo-reuse"] == "pass" and statuses(items)["memo-outage"] == "pass"
    assert items["memo-outage"][1] == ("its memo answered 503; it answered HTTP 503 (by its status): "
                                       "transient, hookflow retries the step")
    # The memo refuses a call without the request's token, and with another run's.
    seen = []

    def prober(req):
        memo = Memo(req)
        seen.append(memo.call("GET", "x")[0])
        memo.auth = "Bearer nope"
        seen.append(memo.call("GET", "x")[0])
        return cont(None)
    webhook.route("/probe", prober)
    check_json(hookflow_bin, webhook.url("/probe"))
    assert seen[:2] == [404, 403]


@pytest.mark.parametrize("answer,expected,detail", [
    (Reply(500, body=b"oops"), "fail",
     "answered HTTP 500 with no {\"error\": {\"message\", \"retryable\"}} body: hookflow can only go "
     "by the status (transient)"),
    (Reply(422, json_body={"error": {"message": "no such order", "retryable": False}}), "pass",
     "answered HTTP 422 with retryable: false (permanent: the run fails)"),
    (Reply(422, json_body={"error": {"message": "no such order", "retryable": "no"}}), "fail",
     "answered HTTP 422 with error.retryable is of another type, not a boolean (hookflow ignores "
     "the body): hookflow can only go by the status (permanent)"),
    (fail("no such order"), "pass", 'answered fail ("no such order"): the run ends, no retry'),
    (cont({"fine": True}), "fail",
     "answered continue: the input meant to fail was not reported as an error"),
])
def test_error_classification_of_an_input_the_webhook_rejects(hookflow_bin, webhook, answer, expected,
                                                              detail):
    webhook.route("/steps", lambda req: answer if req.field("payload") == {"order": "missing"}
                  else cont(None))
    code, items, _ = check_json(hookflow_bin, webhook.url("/steps"), "--error-payload",
                                '{"order": "missing"}')
    assert items["error-classification"] == (expected, detail)
    assert code == (1 if expected == "fail" else 0)
    sent = [r for r in webhook.requests() if r.run_id.endswith("-error")]
    assert len(sent) == 1 and sent[0].step == 0


# ---- reaching it, usage, and hookflow untouched ----------------------------------

def test_an_unreachable_webhook_exits_3(hookflow_bin, refused_port):
    r = check(hookflow_bin, refused_port.url())
    assert (r.returncode, r.stdout) == (3, "")
    assert r.stderr.startswith("hookflow: check-webhook: cannot reach %s: " % refused_port.url()), r.stderr


def test_usage_errors_name_the_argument_and_send_nothing(hookflow_bin, webhook, tmp_path):
    url = webhook.url("/steps")
    secret_file = tmp_path / "secret"
    secret_file.write_text("whsec_short\n")
    cases = [
        ([], "missing argument URL"),
        (["ftp://x"], "URL: must start with http:// or https://"),
        ([url, "--secret", "not-a-secret"], "--secret"),
        ([url, "--secret-file", str(secret_file)], "--secret-file"),
        ([url, "--secret", new_secret(), "--secret-file", str(secret_file)], "give one of --secret"),
        ([url, "--timeout-ms", "0"], "--timeout-ms: must be an integer from 1 to 3600000"),
        ([url, "--step", "x"], "--step: must be an integer"),
        ([url, "--payload", "{bad"], "--payload: not JSON"),
        ([url, "--headers", "[1]"], "--headers"),
        ([url, "--workflow", "a b"], "--workflow"),
        ([url, "--memo-listen", "nowhere"], "--memo-listen"),
        ([url, "--memo-listen", "0.0.0.0:0"], "--memo-url: required with a wildcard --memo-listen"),
        ([url, "--frob"], "unknown option --frob"),
    ]
    for args, message in cases:
        r = subprocess.run([hookflow_bin, "check-webhook"] + args, capture_output=True, text=True,
                           env=_env(), timeout=30)
        assert r.returncode == 2 and r.stdout == "", (args, r)
        assert r.stderr.startswith("hookflow: check-webhook: "), (args, r.stderr)
        assert message in r.stderr, (args, r.stderr)
    assert webhook.requests() == []


def test_a_secret_file_is_read(hookflow_bin, webhook, tmp_path):
    secret = new_secret()
    f = tmp_path / "secret"
    f.write_text(secret + "\n")
    webhook.route("/steps", lambda req: cont(None) if signed_ok(secret, req) else refuse())
    code, items, report = check_json(hookflow_bin, webhook.url("/steps"), "--secret-file", str(f))
    assert code == 0 and report["signed"] is True
    assert statuses(items)["bad-signature"] == "pass"


def test_it_never_talks_to_hookflow(hookflow_bin, service, api, db, webhook):
    secret = new_secret()
    webhook.route("/steps", lambda req: cont(None) if signed_ok(secret, req) else refuse())
    api.put_workflow("w", webhook.url("/steps"), secret=secret)
    tables = [r[0] for r in db.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                                    "ORDER BY tablename")]

    def snapshot():
        return {t: db.scalar("SELECT md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) "
                             "FROM %s x" % t) for t in tables}
    before = snapshot()
    requests_logged = service.log_text().count(" http request ")
    env = _env()
    env.update(HOOKFLOW_URL=service.base_url, HOOKFLOW_DATABASE_URL=db.url)
    r = subprocess.run([hookflow_bin, "check-webhook", webhook.url("/steps"), "--secret", secret],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert snapshot() == before
    assert service.log_text().count(" http request ") == requests_logged
    assert {(q.method, q.path) for q in webhook.requests()} == {("POST", "/steps")}
