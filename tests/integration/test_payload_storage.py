"""Payloads stored once (issue 13, item 3; migrations/0005_payload_once.sql):
a step's payload is written once (step 0's is the run's input, a later step's
the output of the attempt that continued into it), the history still shows
every attempt's payload, reruns and dead letters still find it, and large
values are compressed with lz4."""

import secrets

from harness import Reply, cont, succeed

# The columns that can hold a payload or a value derived from one (jsonb, and
# step_attempt.output json: migrations/0013_payload_json.sql).
COLUMNS = [("run", "input"), ("run", "payload"), ("run", "signal"), ("run", "result"),
           ("step_attempt", "payload"), ("step_attempt", "output"), ("step_attempt", "signal"),
           ("callback", "body"), ("dead_letter", "payload"), ("step_output", "outcome")]


def marked(n):
    """A payload that is found by its marker and does not compress."""
    return {"m": "marker-%d-%s" % (n, secrets.token_hex(8)), "noise": secrets.token_hex(2000)}


def copies(db, marker):
    """How many stored values in the whole database contain `marker`."""
    total = 0
    for table, column in COLUMNS:
        total += int(db.scalar("SELECT count(*) FROM %s WHERE %s::text LIKE '%%%s%%'"
                               % (table, column, marker)))
    return total


def test_each_payload_is_stored_once_and_every_attempt_still_shows_it(api, db, webhook):
    p0, p1, p2 = marked(0), marked(1), marked(2)
    seen = {}

    def handler(req):
        seen.setdefault((req.step, req.attempt), req.field("payload"))
        if req.step == 0:
            return cont(p1)
        if req.step == 1 and req.attempt == 1:
            return Reply(503, {"error": "busy"})
        if req.step == 1:
            return cont(p2)
        return succeed({"done": True})

    webhook.route("/steps", handler)
    api.put_workflow("once", webhook.url())
    run = api.submit("once", input=p0)
    assert api.wait_terminal(run["run_id"])["status"] == "succeeded"

    # The webhook got each step's payload, on the retry too.
    assert seen == {(0, 1): p0, (1, 1): p1, (1, 2): p1, (2, 1): p2}
    # The history shows the payload of every attempt.
    hist = [(s["step"], s["attempt"], s["payload"]) for s in api.steps(run["run_id"])]
    assert hist == [(0, 1, p0), (1, 1, p1), (1, 2, p1), (2, 1, p2)]
    # And each payload is stored once.
    for p in (p0, p1, p2):
        assert copies(db, p["m"]) == 1, p["m"]


def test_a_rerun_finds_each_steps_payload_and_keeps_the_earlier_history(api, db, webhook):
    p0, p1, p2 = marked(0), marked(1), marked(2)
    webhook.route("/steps", lambda req: cont(p1) if req.step == 0 else cont(p2) if req.step == 1
                  else succeed({"got": req.field("payload")["m"]}))
    api.put_workflow("rerun-once", webhook.url())
    rid = api.submit("rerun-once", input=p0)["run_id"]
    assert api.wait_terminal(rid)["result"] == {"got": p2["m"]}

    # From step 2: that step's payload, read from step 1's output.
    r = api.post("/v1/runs/%s/rerun" % rid, {"from_step": 2})
    assert r.status == 201, r
    assert api.wait_terminal(rid)["result"] == {"got": p2["m"]}
    calls = [q for q in webhook.requests("/steps", run_id=rid) if q.step == 2]
    assert [q.field("payload") for q in calls] == [p2, p2]

    # From step 0 with a new input: the first generation's history keeps the
    # input its attempts received.
    new_input = marked(3)
    r = api.post("/v1/runs/%s/rerun" % rid, {"from_step": 0, "input": new_input})
    assert r.status == 201, r
    assert api.wait_terminal(rid)["status"] == "succeeded"
    step0 = {s["generation"]: s["payload"] for s in api.steps(rid) if s["step"] == 0}
    assert step0 == {1: p0, 3: new_input}, sorted(step0)
    # The new input is the run's input, and stored only there.
    assert copies(db, new_input["m"]) == 1, new_input["m"]


def test_a_dead_step_keeps_its_payload_in_the_dead_letter(api, db, webhook):
    p1 = marked(1)
    webhook.route("/steps", lambda req: cont(p1) if req.step == 0 else Reply(400, {"error": "no"}))
    api.put_workflow("dead-once", webhook.url())
    rid = api.submit("dead-once", input={"start": True})["run_id"]
    assert api.wait_terminal(rid)["status"] == "failed"
    dead = api.get("/v1/dead-letters").body["dead_letters"]
    assert [(d["run_id"], d["step"], d["payload"]) for d in dead] == [(rid, 1, p1)]


def test_large_values_are_compressed_with_lz4(api, db, webhook):
    big = {"text": "compressible " * 2000}
    webhook.route("/steps", lambda req: cont(big) if req.step == 0 else succeed(None))
    api.put_workflow("lz4", webhook.url())
    rid = api.submit("lz4", input=big)["run_id"]
    assert api.wait_terminal(rid)["status"] == "succeeded"
    assert db.scalar("SELECT pg_column_compression(input) FROM run WHERE run_id = '%s'" % rid) == "lz4"
    assert db.scalar("SELECT pg_column_compression(output) FROM step_attempt "
                     "WHERE run_id = '%s' AND step = 0" % rid) == "lz4"


def test_numbers_beyond_64_bits_are_kept_and_read_back(api, webhook):
    # jsonb renders 1e30 as a 31-digit integer, which the service's JSON
    # library cannot hold as an integer: it reads such a document with reals.
    seen = []

    def handler(req):
        seen.append(req.field("payload"))
        return cont({"huge": 1.5e300}) if req.step == 0 else succeed({"r": 1e30, "n": 7})

    webhook.route("/steps", handler)
    api.put_workflow("big-numbers", webhook.url())
    run = api.submit("big-numbers", input={"big": 1e30, "small": 5})
    assert float(run["input"]["big"]) == 1e30 and run["input"]["small"] == 5, run
    done = api.wait_terminal(run["run_id"])
    assert done["status"] == "succeeded", done
    assert float(done["result"]["r"]) == 1e30 and done["result"]["n"] == 7, done
    assert float(seen[0]["big"]) == 1e30 and float(seen[1]["huge"]) == 1.5e300, seen
    again = api.submit("big-numbers", expect=200, run_id=run["run_id"],
                       input={"big": 1e30, "small": 5})
    assert again["newly_submitted"] is False, again


def test_an_answers_payload_and_result_are_stored_as_written(api, db, webhook):
    # The payload and result of an answer are passed on as the text the
    # webhook wrote (base/jsonscan.c), not decoded to doubles and written
    # again: 0.1 stays 0.1 (a double would be written 0.10000000000000001),
    # and a number's digits are kept. The payload is stored as that very
    # text (json, migrations/0013_payload_json.sql: its spacing, key order
    # and escapes too) and is what the next step receives. An answer only
    # jansson can vouch for (an escaped key) is decoded as before and ends
    # the same.
    seen, raw = [], []
    written = b'{"x": 0.1, "d": 2.50, "s": "caf\\u00e9"}'
    answers = [
        b'{"outcome":"continue","payload":' + written + b'}',
        b'{"outcome":"continue","payload":{"\\u0078": 0.25}}',
        b'{"result": {"total": 0.3, "n": [1, 2]}, "outcome": "succeed"}',
    ]

    def handler(req):
        seen.append(req.field("payload"))
        raw.append(req.body)
        return Reply(200, body=answers[req.step], headers={"Content-Type": "application/json"})

    webhook.route("/steps", handler)
    api.put_workflow("as-written", webhook.url())
    rid = api.submit("as-written", input={"start": 1})["run_id"]
    done = api.wait_terminal(rid)
    assert done["status"] == "succeeded", done
    assert seen[1] == {"x": 0.1, "d": 2.5, "s": "caf\u00e9"}, seen
    assert b'"payload":' + written in raw[1], raw[1]
    assert seen[2] == {"x": 0.25}, seen
    outputs = db.sql("SELECT step, output::text, pg_typeof(output)::text FROM step_attempt "
                     "WHERE run_id = '%s' AND step < 2 ORDER BY step" % rid)
    assert outputs == [["0", written.decode(), "json"], ["1", '{"x": 0.25}', "json"]], outputs
    assert db.scalar("SELECT result::text FROM run WHERE run_id = '%s'" % rid) == \
        '{"n": [1, 2], "total": 0.3}'
    # The history shows them as values.
    hist = [(s["step"], s["payload"]) for s in api.steps(rid)]
    assert hist == [(0, {"start": 1}), (1, seen[1]), (2, seen[2])], hist
    # A repeated key inside the payload is refused, as before.
    webhook.route("/steps", lambda req: Reply(
        200, body=b'{"outcome":"continue","payload":{"a":1,"a":2}}',
        headers={"Content-Type": "application/json"}))
    api.put_workflow("dup-key", webhook.url(), max_attempts=1)
    bad = api.wait_terminal(api.submit("dup-key", input={})["run_id"])
    assert bad["status"] == "failed" and "duplicate object key" in bad["error"], bad
