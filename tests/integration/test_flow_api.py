"""Flow control's API (issue 14, items 1, 2 and 7; README "Flow control"):
the run's `concurrency_key` (POST /v1/runs and group members: validated,
stored, returned on the run, filtered by GET /v1/runs?concurrency_key=, sent
to the webhook and in the callback), the workflow's `key_concurrency` and
`paused` in its JSON, and POST /v1/workflows/{name}/pause and /resume.

What a paused workflow or key_concurrency does to the claims is tested with
the claim engine, not here."""

import hashlib
import json

import pytest

from harness import Reply, StepScript, assert_error, succeed
from helpers_issue4 import list_pages, member_run_id, put_group

PARKED = 600000  # a delay that keeps a run scheduled for the whole test
NEVER = "http://127.0.0.1:9/never"
ODD_KEY = "customer/42 caf\u00e9 \u65e5\u672c \U0001f600 \"quoted\" back\\slash"


def run_count(sql):
    return int(sql("SELECT count(*) FROM run")[0][0])


def list_runs(api, **params):
    """Every run GET /v1/runs lists for `params`, following next_cursor;
    returns (run ids in order, number of pages)."""
    pages = list_pages(api, "/v1/runs", "runs", **params)
    return [x["run_id"] for page in pages for x in page], len(pages)


# --------------------------------------------------------------------------
# concurrency_key: validation
# --------------------------------------------------------------------------

@pytest.mark.parametrize("key", [
    pytest.param(42, id="integer"),
    pytest.param(["k"], id="array"),
    pytest.param({"k": 1}, id="object"),
    pytest.param(True, id="boolean"),
    pytest.param("", id="empty"),
    pytest.param("k" * 257, id="257-bytes"),
    pytest.param("\u00e9" * 128 + "k", id="257-bytes-utf8"),
    pytest.param("tab\there", id="tab"),
    pytest.param("line\nbreak", id="newline"),
    pytest.param("bell\u0007", id="c0"),
    pytest.param("del\u007f", id="del"),
    pytest.param("next\u0085line", id="c1"),
])
def test_an_invalid_concurrency_key_is_400_naming_it_and_writes_nothing(api, sql, key):
    # (a NUL never reaches the field: the body's JSON parser refuses \u0000)
    api.put_workflow("wf", NEVER)
    r = api.post("/v1/runs", {"workflow": "wf", "run_id": "bad-key", "concurrency_key": key,
                              "delay_ms": PARKED, "kv": {"put": {"app/bad-key": 1}}})
    assert_error(r, 400, "invalid_argument", "concurrency_key")
    assert api.get("/v1/runs/bad-key").status == 404
    assert run_count(sql) == 0
    assert sql("SELECT count(*) FROM kv")[0][0] == "0", "a refused submission applies no kv effect"


def test_a_concurrency_key_of_256_bytes_is_accepted_and_null_is_none(api):
    api.put_workflow("wf", NEVER)
    key = "\u00e9" * 128  # 256 bytes of UTF-8
    assert api.submit("wf", run_id="max", concurrency_key=key, delay_ms=PARKED)[
        "concurrency_key"] == key
    assert api.submit("wf", run_id="null", concurrency_key=None, delay_ms=PARKED)[
        "concurrency_key"] is None


def test_an_invalid_member_concurrency_key_is_400_naming_the_member_and_records_nothing(api, sql):
    api.put_workflow("wf", NEVER)
    for bad in (7, "", "k" * 257, "ctl\u0001"):
        members = [{"key": "a", "concurrency_key": "ok"}, {"key": "b", "concurrency_key": bad}]
        r = put_group(api, "g-bad", "wf", members)
        assert_error(r, 400, "invalid_argument", "members[1].concurrency_key")
        assert api.get("/v1/groups/g-bad").status == 404
        assert run_count(sql) == 0
    # the group's own level has no key: members carry theirs
    r = put_group(api, "g-bad", "wf", [{"key": "a"}], concurrency_key="k")
    assert_error(r, 400, "invalid_argument", "concurrency_key")
    assert run_count(sql) == 0


# --------------------------------------------------------------------------
# concurrency_key: on the run, in lists, in the filter
# --------------------------------------------------------------------------

def test_the_key_is_returned_on_the_run_and_null_without_one(api):
    api.put_workflow("wf", NEVER)
    created = api.submit("wf", run_id="keyed", concurrency_key=ODD_KEY, delay_ms=PARKED)
    assert created["concurrency_key"] == ODD_KEY
    assert api.run("keyed")["concurrency_key"] == ODD_KEY
    plain = api.submit("wf", run_id="plain", delay_ms=PARKED)
    assert "concurrency_key" in plain and plain["concurrency_key"] is None
    got = api.run("plain")
    assert "concurrency_key" in got and got["concurrency_key"] is None
    listed = {x["run_id"]: x for x in api.get("/v1/runs").body["runs"]}
    assert listed["keyed"]["concurrency_key"] == ODD_KEY
    assert listed["plain"]["concurrency_key"] is None
    # a cancel answers the run too
    r = api.post("/v1/runs/keyed/cancel")
    assert r.status == 200 and r.body["concurrency_key"] == ODD_KEY, r


def test_list_filters_by_concurrency_key_alone_and_with_other_filters_and_pages(api, webhook):
    webhook.route("/steps", StepScript({0: succeed("done")}))
    api.put_workflow("a", NEVER)
    api.put_workflow("b", webhook.url())
    a_keyed = ["a-k1-%d" % i for i in range(5)]
    for rid in a_keyed:
        api.submit("a", run_id=rid, concurrency_key="k1", delay_ms=PARKED)
    api.submit("a", run_id="a-k2", concurrency_key="k2", delay_ms=PARKED)
    api.submit("a", run_id="a-none", delay_ms=PARKED)
    api.submit("b", run_id="b-k1", concurrency_key="k1")
    api.submit("b", run_id="b-odd", concurrency_key=ODD_KEY)
    assert api.wait_terminal("b-k1")["status"] == "succeeded"
    assert api.wait_terminal("b-odd")["status"] == "succeeded"
    newest_first = ["b-k1"] + a_keyed[::-1]

    ids, pages = list_runs(api, concurrency_key="k1", limit=2)
    assert ids == newest_first and pages == 3, (ids, pages)
    ids, pages = list_runs(api, concurrency_key="k1", workflow="a", limit=2)
    assert ids == a_keyed[::-1] and pages == 3, (ids, pages)
    assert list_runs(api, concurrency_key="k1", status="succeeded")[0] == ["b-k1"]
    assert list_runs(api, concurrency_key="k1", status="scheduled", workflow="a", limit=4)[0] == \
        a_keyed[::-1]
    assert list_runs(api, concurrency_key="k1", workflow="b", status="scheduled")[0] == []
    assert list_runs(api, concurrency_key="k2")[0] == ["a-k2"]
    assert list_runs(api, concurrency_key=ODD_KEY)[0] == ["b-odd"]
    assert list_runs(api, concurrency_key="no-such-key")[0] == []
    # an empty value is no filter (what a form sends)
    assert len(list_runs(api, concurrency_key="")[0]) == 9
    for bad in ("k" * 257, "ctl\u0001", "tab\tkey"):
        assert_error(api.get("/v1/runs", params={"concurrency_key": bad}), 400, "invalid_argument",
                     "concurrency_key")
    # invalid UTF-8 in the query
    assert_error(api.get("/v1/runs?concurrency_key=%FF%FE"), 400, "invalid_argument",
                 "concurrency_key")


def test_a_duplicate_submission_with_another_key_answers_the_run_as_first_submitted(api, sql):
    api.put_workflow("wf", NEVER)
    first = api.submit("wf", run_id="dup", input={"n": 1}, concurrency_key="first",
                       delay_ms=PARKED)
    assert first["newly_submitted"] is True and first["concurrency_key"] == "first"
    for other in ({"concurrency_key": "second"}, {}, {"concurrency_key": None}):
        again = api.submit("wf", expect=200, run_id="dup", input={"n": 1}, delay_ms=PARKED, **other)
        assert again["newly_submitted"] is False, again
        assert again["concurrency_key"] == "first", (other, again)
    r = api.post("/v1/runs", {"workflow": "wf", "run_id": "dup", "input": {"n": 2},
                              "concurrency_key": "second"})
    assert_error(r, 409, "input_mismatch", "input")
    assert sql("SELECT concurrency_key FROM run WHERE run_id = 'dup'") == [["first"]]
    # and a key given to a run first submitted without one is not added either
    api.submit("wf", run_id="dup-none", delay_ms=PARKED)
    assert api.submit("wf", expect=200, run_id="dup-none", concurrency_key="late",
                      delay_ms=PARKED)["concurrency_key"] is None


# --------------------------------------------------------------------------
# concurrency_key: sent to the webhook and in the callback
# --------------------------------------------------------------------------

def test_the_webhook_and_the_callback_receive_the_key_or_null(api, webhook):
    webhook.route("/steps", StepScript({0: Reply(200, {"outcome": "continue", "payload": 1}),
                                        1: succeed("ok")}))
    webhook.route("/done", lambda req: Reply(200, body=b""))
    api.put_workflow("wf", webhook.url("/steps"), callback_url=webhook.url("/done"))
    api.submit("wf", run_id="sent-keyed", concurrency_key=ODD_KEY)
    api.submit("wf", run_id="sent-plain")
    for rid in ("sent-keyed", "sent-plain"):
        assert api.wait_terminal(rid)["status"] == "succeeded"
    keyed = webhook.wait_requests(2, path="/steps", run_id="sent-keyed")
    plain = webhook.wait_requests(2, path="/steps", run_id="sent-plain")
    for req in keyed:
        assert req.json["concurrency_key"] == ODD_KEY, req.json
    for req in plain:
        assert "concurrency_key" in req.json and req.json["concurrency_key"] is None, req.json

    def callbacks(_):
        got = {r.json["run_id"]: r.json for r in webhook.requests("/done")}
        return got if len(got) == 2 else None
    cbs = webhook.wait_for(callbacks, message="both callbacks")
    assert cbs["sent-keyed"]["concurrency_key"] == ODD_KEY
    assert "concurrency_key" in cbs["sent-plain"] and cbs["sent-plain"]["concurrency_key"] is None


# --------------------------------------------------------------------------
# concurrency_key: group members
# --------------------------------------------------------------------------

def test_group_members_carry_their_own_keys_to_the_run_the_list_and_the_webhook(api, webhook):
    webhook.route("/steps", StepScript({0: succeed("m")}))
    api.put_workflow("wf", webhook.url())
    members = [{"key": "a", "input": 1, "concurrency_key": "tenant-1"},
               {"key": "b", "input": 2, "concurrency_key": "tenant-2"},
               {"key": "c", "input": 3}]
    r = put_group(api, "g-keys", "wf", members)
    assert r.status == 201, r
    ids = {m["key"]: member_run_id("g-keys", m["key"]) for m in members}
    want = {"a": "tenant-1", "b": "tenant-2", "c": None}
    for k, rid in ids.items():
        assert api.wait_terminal(rid)["concurrency_key"] == want[k], k
        req = webhook.wait_requests(1, path="/steps", run_id=rid)[0]
        assert "concurrency_key" in req.json and req.json["concurrency_key"] == want[k], req.json
    assert list_runs(api, concurrency_key="tenant-1")[0] == [ids["a"]]
    assert list_runs(api, concurrency_key="tenant-2", group_id="g-keys")[0] == [ids["b"]]

    # the key is part of the recorded member set: the same set again is 200,
    # another key (or none) for a member is another set
    assert put_group(api, "g-keys", "wf", members).status == 200
    for changed in ({"key": "a", "input": 1, "concurrency_key": "tenant-9"},
                    {"key": "a", "input": 1}):
        r = put_group(api, "g-keys", "wf", [changed] + members[1:])
        assert_error(r, 409, "group_mismatch")
    assert api.run(ids["a"])["concurrency_key"] == "tenant-1"


def test_a_group_without_keys_keeps_its_manifest(api, sql):
    """Members without a key hash as before the field existed: a group
    recorded without keys is still accepted as the same set."""
    api.put_workflow("wf", NEVER)
    members = [{"key": "a", "input": {"x": 1}, "headers": {"h": "1"}}, {"key": "b"}]
    assert put_group(api, "g-plain", "wf", members, headers={"t": "g"}).status == 201
    manifest = sql("SELECT encode(manifest_hash, 'hex') FROM run_group WHERE group_id = 'g-plain'")
    # the manifest hash of the same members computed without the new field
    # (canonical JSON of the ordered [{key, input, headers}] list)
    listed = [{"key": "a", "input": {"x": 1}, "headers": {"t": "g", "h": "1"}},
              {"key": "b", "input": None, "headers": {"t": "g"}}]
    canon = json.dumps(listed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert manifest == [[hashlib.sha256(canon.encode()).hexdigest()]]
    assert put_group(api, "g-plain", "wf", members, headers={"t": "g"}).status == 200


# --------------------------------------------------------------------------
# Workflows: key_concurrency and paused
# --------------------------------------------------------------------------

@pytest.mark.parametrize("value", [-1, 1000001, "2", 1.5, True, [1]])
def test_an_invalid_key_concurrency_is_400_naming_it_and_writes_nothing(api, value):
    r = api.put("/v1/workflows/wf", {"url": NEVER, "key_concurrency": value})
    assert_error(r, 400, "invalid_argument", "key_concurrency")
    assert api.get("/v1/workflows/wf").status == 404
    api.put_workflow("wf", NEVER, key_concurrency=3)
    r = api.put("/v1/workflows/wf", {"url": NEVER, "key_concurrency": value})
    assert_error(r, 400, "invalid_argument", "key_concurrency")
    assert api.get("/v1/workflows/wf").body["key_concurrency"] == 3


def test_the_workflow_shows_key_concurrency_and_paused_with_their_defaults(api):
    r = api.put("/v1/workflows/wf", {"url": NEVER})
    assert r.status == 201, r
    assert r.body["key_concurrency"] == 0 and r.body["paused"] is False, r.body
    got = api.get("/v1/workflows/wf").body
    assert got["key_concurrency"] == 0 and got["paused"] is False
    for n in (1, 1000000, 0):
        r = api.put("/v1/workflows/wf", {"url": NEVER, "key_concurrency": n})
        assert r.status == 200 and r.body["key_concurrency"] == n, r
    api.put_workflow("wf", NEVER, key_concurrency=7)
    # a PUT replaces: a field left out falls back to its default
    assert api.put("/v1/workflows/wf", {"url": NEVER}).body["key_concurrency"] == 0
    listed = api.get("/v1/workflows").body["workflows"]
    assert [(w["name"], w["key_concurrency"], w["paused"]) for w in listed] == [("wf", 0, False)]


def test_pause_and_resume_answer_the_workflow_and_are_idempotent(api):
    created = api.put_workflow("wf", NEVER, key_concurrency=2)
    r = api.post("/v1/workflows/wf/pause")
    assert r.status == 200, r
    assert r.body["paused"] is True
    assert r.body == dict(created, paused=True), "pause changes nothing else, updated_at included"
    assert api.get("/v1/workflows/wf").body == r.body
    again = api.post("/v1/workflows/wf/pause", {})
    assert again.status == 200 and again.body == r.body, again
    resumed = api.post("/v1/workflows/wf/resume")
    assert resumed.status == 200 and resumed.body == created, resumed
    again = api.post("/v1/workflows/wf/resume", {})
    assert again.status == 200 and again.body == created, again
    assert api.get("/v1/workflows/wf").body["paused"] is False


def test_pause_and_resume_of_an_unknown_workflow_are_404_and_a_bad_name_400(api, sql):
    for action in ("pause", "resume"):
        assert_error(api.post("/v1/workflows/nope/%s" % action), 404, "not_found", "nope")
        assert_error(api.post("/v1/workflows/bad%%21name/%s" % action), 400, "invalid_argument",
                     "name")
    assert sql("SELECT count(*) FROM workflow")[0][0] == "0"


def test_put_leaves_paused_alone(api):
    api.put_workflow("wf", NEVER)
    assert api.post("/v1/workflows/wf/pause").body["paused"] is True
    r = api.put("/v1/workflows/wf", {"url": NEVER + "/other", "key_concurrency": 4,
                                     "max_concurrency": 9})
    assert r.status == 200, r
    assert r.body["paused"] is True and r.body["url"] == NEVER + "/other"
    assert r.body["key_concurrency"] == 4 and r.body["max_concurrency"] == 9
    assert api.get("/v1/workflows/wf").body["paused"] is True
    # paused is no field of a PUT: pause and resume set it
    assert_error(api.put("/v1/workflows/wf", {"url": NEVER, "paused": False}), 400,
                 "invalid_argument", "paused")
    assert api.get("/v1/workflows/wf").body["paused"] is True
    assert api.post("/v1/workflows/wf/resume").body["paused"] is False
    assert api.put("/v1/workflows/wf", {"url": NEVER}).body["paused"] is False


def test_a_pause_body_other_than_empty_or_an_empty_object_is_refused(api):
    api.put_workflow("wf", NEVER)
    for action in ("pause", "resume"):
        path = "/v1/workflows/wf/%s" % action
        assert_error(api.post(path, {"paused": True}), 400, "invalid_argument", "paused")
        assert_error(api.post(path, {"reason": "maintenance"}), 400, "invalid_argument", "reason")
        for raw in ("[]", "true", "{", '"x"'):
            assert_error(api.request("POST", path, raw=raw), 400, "invalid_argument")
        assert_error(api.request("POST", path, raw="{}", content_type="text/plain"), 415,
                     "unsupported_media_type")
        assert api.get("/v1/workflows/wf").body["paused"] is False, "a refused %s changed it" % action
    # a body of empty JSON object, or none at all, is fine
    assert api.request("POST", "/v1/workflows/wf/pause", raw="{}").status == 200
    assert api.request("POST", "/v1/workflows/wf/resume", raw=b"", content_type=None).status == 200
    assert api.get("/v1/workflows/wf").body["paused"] is False


def test_a_paused_workflow_still_takes_submissions_and_cancels(api, sql):
    """Pause stops claims only (tested with the claim engine): the API keeps
    accepting runs and cancels for the workflow."""
    api.put_workflow("wf", NEVER)
    assert api.post("/v1/workflows/wf/pause").status == 200
    run = api.submit("wf", run_id="while-paused", concurrency_key="k")
    assert run["status"] == "pending" and run["concurrency_key"] == "k"
    r = api.post("/v1/runs/while-paused/cancel")
    assert r.status == 200 and r.body["status"] == "cancelled", r
