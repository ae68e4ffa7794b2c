"""Submit (openapi/openapi.yaml, POST /v1/runs): POST /v1/runs validation,
defaults, generated ids, idempotent resubmission over canonical JSON, and the
kv effects."""

import json
import time

import pytest

from harness import (TS_RE, ULID_RE, StepScript, assert_error, epoch_to_iso, iso_to_epoch,
                     succeed)
from kvcheck import kv_get

PARKED = 600000  # delay that keeps a run scheduled for the whole test


@pytest.fixture
def wf(api):
    api.put_workflow("wf", "http://127.0.0.1:9/never", priority=77, max_attempts=4)
    return "wf"


def test_submit_creates_run_201_with_the_run_object(api, wf):
    before = time.time()
    r = api.post("/v1/runs", {"workflow": wf, "run_id": "order-42", "input": {"any": ["json", 1]},
                              "headers": {"tenant": "acme"}, "priority": 100, "max_attempts": 5,
                              "delay_ms": PARKED})
    assert r.status == 201, r
    run = r.body
    assert run["newly_submitted"] is True
    assert run["run_id"] == "order-42"
    assert run["workflow"] == "wf"
    assert run["status"] == "scheduled"
    assert run["step"] == 0
    assert "attempt" in run
    assert run["input"] == {"any": ["json", 1]}
    assert run["headers"] == {"tenant": "acme"}
    assert run["priority"] == 100
    assert run["max_attempts"] == 5
    assert run["generation"] == 1
    assert run["cancel_requested"] is False
    for k in ("created_at", "updated_at", "next_attempt_at"):
        assert TS_RE.match(run[k]), (k, run[k])
    due = iso_to_epoch(run["next_attempt_at"])
    assert before + PARKED / 1000 - 5 <= due <= time.time() + PARKED / 1000 + 5
    assert run.get("result") is None and run.get("error") is None and run.get("error_kind") is None
    assert run.get("finished_at") is None

    got = api.run("order-42")
    assert got["status"] == "scheduled" and got["input"] == {"any": ["json", 1]}
    assert "newly_submitted" not in got or got["newly_submitted"] is False


def test_submit_takes_defaults_from_workflow(api, wf):
    run = api.submit(wf, delay_ms=PARKED)
    assert run["priority"] == 77
    assert run["max_attempts"] == 4
    assert run["input"] is None
    assert run["headers"] in ({}, None)


def test_submit_without_run_id_generates_ulids(api, wf):
    a = api.submit(wf, delay_ms=PARKED)["run_id"]
    b = api.submit(wf, delay_ms=PARKED)["run_id"]
    assert ULID_RE.match(a), a
    assert ULID_RE.match(b), b
    assert a != b
    assert b > a, "ULIDs of one process increase"


def test_submit_with_run_at_schedules_the_run(api, wf):
    at = epoch_to_iso(time.time() + 3600)
    run = api.submit(wf, run_at=at)
    assert run["status"] == "scheduled"
    assert run["next_attempt_at"] == at


def test_resubmit_same_input_is_200_not_newly_submitted(api, wf):
    first = api.submit(wf, run_id="dup-1", input={"a": 1}, delay_ms=PARKED)
    r = api.post("/v1/runs", {"workflow": wf, "run_id": "dup-1", "input": {"a": 1}, "delay_ms": PARKED})
    assert r.status == 200, r
    assert r.body["newly_submitted"] is False
    assert r.body["run_id"] == "dup-1"
    assert r.body["created_at"] == first["created_at"]
    assert r.body["status"] == "scheduled"


def test_resubmit_compares_canonical_json_of_input(api, wf):
    raw1 = b'{"workflow":"wf","run_id":"canon","delay_ms":600000,' \
           b'"input":{"b":1,"a":[1,2,{"y":"\\u00e9","x":null}],"c":{"z":true,"m":1.5}}}'
    r = api.request("POST", "/v1/runs", raw=raw1)
    assert r.status == 201, r
    raw2 = ('{ "input" : { "c" : { "m" : 1.5 , "z" : true } ,\n "a" : [ 1 , 2 , { "x" : null , "y" : "\u00e9" } ] ,'
            ' "b" : 1 } , "delay_ms": 600000, "run_id" : "canon" , "workflow" : "wf" }').encode()
    r = api.request("POST", "/v1/runs", raw=raw2)
    assert r.status == 200, r
    assert r.body["newly_submitted"] is False


def test_resubmit_with_different_input_is_409_input_mismatch(api, wf):
    api.submit(wf, run_id="dup-2", input={"a": 1}, delay_ms=PARKED)
    assert_error(api.post("/v1/runs", {"workflow": wf, "run_id": "dup-2", "input": {"a": 2}}),
                 409, "input_mismatch")
    assert_error(api.post("/v1/runs", {"workflow": wf, "run_id": "dup-2"}), 409, "input_mismatch")
    assert api.run("dup-2")["input"] == {"a": 1}


def test_resubmit_after_termination_answers_from_the_terminated_run(api, webhook):
    webhook.route("/steps", StepScript({0: succeed({"done": True})}))
    api.put_workflow("wf", webhook.url())
    api.submit("wf", run_id="term-1", input=[1, 2])
    done = api.wait_terminal("term-1")
    assert done["status"] == "succeeded"
    r = api.post("/v1/runs", {"workflow": "wf", "run_id": "term-1", "input": [1, 2]})
    assert r.status == 200, r
    assert r.body["newly_submitted"] is False
    assert r.body["status"] == "succeeded"
    assert r.body["result"] == {"done": True}
    assert len(webhook.requests(run_id="term-1")) == 1, "a resubmission runs nothing"
    assert_error(api.post("/v1/runs", {"workflow": "wf", "run_id": "term-1", "input": [2, 1]}),
                 409, "input_mismatch")


def test_submit_applies_kv_effects(api, db, wf):
    api.submit(wf, run_id="kv-1", delay_ms=PARKED,
               kv={"put": {"app/orders/1": {"state": "new"}, "app/tmp/1": 1}})
    assert kv_get(api, db, "app/orders/1") == {"state": "new"}
    assert kv_get(api, db, "app/tmp/1") == 1
    api.submit(wf, run_id="kv-2", delay_ms=PARKED, kv={"delete": ["app/tmp/1"]})
    assert kv_get(api, db, "app/tmp/1") is None


def test_duplicate_submission_does_not_apply_kv_effects(api, db, wf):
    api.submit(wf, run_id="kv-dup", input=1, delay_ms=PARKED,
               kv={"put": {"app/orders/7": {"state": "new"}, "app/keep": "k"}})
    r = api.post("/v1/runs", {"workflow": wf, "run_id": "kv-dup", "input": 1, "delay_ms": PARKED,
                              "kv": {"put": {"app/orders/7": {"state": "dup"}, "app/extra": 1},
                                     "delete": ["app/keep"]}})
    assert r.status == 200 and r.body["newly_submitted"] is False, r
    assert kv_get(api, db, "app/orders/7") == {"state": "new"}
    assert kv_get(api, db, "app/keep") == "k"
    assert kv_get(api, db, "app/extra") is None


@pytest.mark.parametrize("run_id", ["bad id!", pytest.param("x" * 129, id="129-bytes"), "", "a/b", "caf\u00e9", 12])
def test_invalid_run_id_is_400(api, wf, run_id):
    assert_error(api.post("/v1/runs", {"workflow": wf, "run_id": run_id}), 400, "invalid_argument", "run_id")


def test_run_id_of_128_allowed_characters_is_accepted(api, wf):
    rid = ("Ab9_-" * 26)[:128]
    assert api.submit(wf, run_id=rid, delay_ms=PARKED)["run_id"] == rid


@pytest.mark.parametrize("extra,field", [
    ({"headers": {"workflow.run_id": "x"}}, "headers"),
    ({"headers": {"tenant": "a", "workflow.anything": "b"}}, "headers"),
    ({"headers": ["tenant"]}, "headers"),
    ({"kv": {"put": {"workflow/steps/x": 1}}}, "kv"),
    ({"kv": {"delete": ["workflow/x"]}}, "kv"),
    ({"kv": {"put": {"app/big": "v" * (256 * 1024 + 16)}}}, "kv"),
    ({"kv": {"put": {"app/a": 1}, "delete": ["app/a"]}}, "kv"),
    ({"kv": {"put": {"": 1}}}, "kv"),
    ({"kv": {"upsert": {}}}, "kv"),
    ({"delay_ms": -1}, "delay_ms"),
    ({"delay_ms": "10"}, "delay_ms"),
    ({"run_at": "tomorrow"}, "run_at"),
    ({"priority": -1}, "priority"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": 1001}, "max_attempts"),
    ({"callback_url": "ftp://127.0.0.1/x"}, "callback_url"),
])
def test_invalid_submission_is_400_naming_the_field(api, wf, extra, field):
    body = {"workflow": wf, "run_id": "invalid-1"}
    body.update(extra)
    assert_error(api.post("/v1/runs", body), 400, "invalid_argument", field)
    assert api.get("/v1/runs/invalid-1").status == 404, "a rejected submission creates nothing"


def test_delay_ms_and_run_at_are_exclusive(api, wf):
    r = api.post("/v1/runs", {"workflow": wf, "run_id": "both", "delay_ms": 10,
                              "run_at": epoch_to_iso(time.time() + 60)})
    assert_error(r, 400, "invalid_argument")
    assert "delay_ms" in r.error_message or "run_at" in r.error_message, r
    assert api.get("/v1/runs/both").status == 404


def test_kv_value_of_exactly_256_kib_is_accepted(api, db, wf):
    value = "v" * (256 * 1024 - 2)  # canonical JSON: the quotes make it 256 KiB
    api.submit(wf, run_id="kv-max", delay_ms=PARKED, kv={"put": {"app/max": value}})
    assert kv_get(api, db, "app/max") == value


def test_missing_workflow_field_is_400(api, wf):
    assert_error(api.post("/v1/runs", {"input": 1}), 400, "invalid_argument", "workflow")


def test_unknown_workflow_is_404(api):
    assert_error(api.post("/v1/runs", {"workflow": "nope", "run_id": "r1"}), 404, "not_found")
    assert api.get("/v1/runs/r1").status == 404


def test_get_unknown_run_is_404(api):
    assert_error(api.get("/v1/runs/never-submitted"), 404, "not_found")
    assert_error(api.get("/v1/runs/never-submitted/steps"), 404, "not_found")


def test_submit_body_with_json_text_input_round_trips(api, wf):
    inp = {"s": "\u00e9\u4e2d\U0001f600", "n": -1.25e-7, "big": 12345678901234, "b": False, "z": None,
           "nested": [[[]], {}]}
    run = api.submit(wf, input=inp, delay_ms=PARKED)
    assert api.run(run["run_id"])["input"] == json.loads(json.dumps(inp))


def test_concurrent_submissions_each_get_their_own_answer(api, sql, wf):
    # Submissions arriving together are committed in shared batches (the
    # submitter): each request still gets its own answer, and one that fails
    # (unknown workflow, input mismatch) changes nothing for the others.
    import threading

    jobs = []
    for i in range(12):
        jobs += [("new", {"workflow": wf, "run_id": "batch-%d" % i, "input": {"i": i}})] * 3
        jobs.append(("mismatch", {"workflow": wf, "run_id": "batch-%d" % i, "input": {"i": -i - 1}}))
        jobs.append(("unknown", {"workflow": "no-such-wf", "run_id": "batch-x%d" % i, "input": i}))
    for j in jobs:
        j[1]["delay_ms"] = PARKED
    answers = [None] * len(jobs)
    start = threading.Barrier(len(jobs))

    def go(k):
        start.wait()
        answers[k] = api.post("/v1/runs", jobs[k][1])

    threads = [threading.Thread(target=go, args=(k,)) for k in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(a is not None for a in answers)

    for i in range(12):
        rid = "batch-%d" % i
        same = [a for (kind, body), a in zip(jobs, answers) if kind == "new" and body["run_id"] == rid]
        other = [a for (kind, body), a in zip(jobs, answers) if kind == "mismatch" and body["run_id"] == rid]
        # The first submission to commit creates the run; a later one with the
        # same input is a duplicate, one with another input a mismatch. The
        # mismatching one may also commit first: then it created the run and
        # the same-input ones are the mismatches.
        created = [a for a in same + other if a.status == 201]
        assert len(created) == 1, [(a.status, a.body) for a in same + other]
        winner_input = created[0].body["input"]
        for a in same + other:
            assert a.status in (200, 201, 409), a
            if a.status == 409:
                assert_error(a, 409, "input_mismatch", "input")
            else:
                assert a.body["run_id"] == rid and a.body["input"] == winner_input, a
                assert a.body["newly_submitted"] is (a.status == 201)
    for (kind, body), a in zip(jobs, answers):
        if kind == "unknown":
            assert_error(a, 404, "not_found", "workflow")
    assert sql("SELECT count(*) FROM run") == [["12"]]
    assert sql("SELECT count(*) FROM run WHERE run_id LIKE 'batch-x%'") == [["0"]]
