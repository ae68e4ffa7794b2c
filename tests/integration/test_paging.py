"""Bounded answers (issue 12, item 5): GET /v1/runs/{id}/steps pages with
`limit` and `cursor` like the other lists, and every list caps the bytes of
one answer (HOOKFLOW_MAX_PAGE_BYTES, 4 MiB by default): a page ends early,
with a next_cursor, when its items' JSON would pass the cap; a single item
larger than the cap comes alone, so following the cursors always returns
every item exactly once."""

import base64
import json

import pytest

from harness import Reply, assert_error, cont, succeed
from helpers_issue3 import kv_put
from helpers_issue4 import put_group, q, wait_group_terminal

PARKED = 600000
CAP = 4096  # HOOKFLOW_MAX_PAGE_BYTES of the capped tests below
# Item sizes around CAP: small ones share a page, 5000 and 6000 come alone.
SIZES = [100, 1500, 2500, 5000, 300, 300, 300, 1200, 3900, 50, 2000, 2000, 6000, 10]


def item_bytes(item):
    """The bytes of an item's JSON text as PostgreSQL renders jsonb (", " and
    ": " separators, UTF-8), which is what the cap counts."""
    return len(json.dumps(item, ensure_ascii=False).encode())


def walk(api, path, key, **params):
    """Every page of a list, following next_cursor; a list of item lists."""
    pages, cursor = [], None
    while True:
        p = dict(params)
        if cursor is not None:
            p["cursor"] = cursor
        r = api.get(path, params=p)
        assert r.status == 200, r
        assert "next_cursor" in r.body, "no next_cursor: %r" % (sorted(r.body),)
        pages.append(r.body[key])
        cursor = r.body["next_cursor"]
        if cursor is None:
            return pages
        assert r.body[key], "an empty page with a next_cursor"
        assert len(pages) < 500, "paging does not progress"


def assert_capped(pages, cap, limit):
    """Each page holds at most `cap` bytes of items, or one larger item alone,
    and ends only where the next item would not have fitted (or at `limit`)."""
    for i, page in enumerate(pages):
        sizes = [item_bytes(x) for x in page]
        assert len(page) <= limit, "page %d has %d items, limit %d" % (i, len(page), limit)
        if len(page) > 1:
            assert sum(sizes) <= cap, "page %d holds %d bytes of items: %r" % (i, sum(sizes), sizes)
        if i + 1 < len(pages) and len(page) < limit:
            nxt = item_bytes(pages[i + 1][0])
            assert sum(sizes) + nxt > cap, \
                "page %d ended early: %r, and the next item (%d bytes) fitted" % (i, sizes, nxt)
    return [x for page in pages for x in page]


def assert_alone(pages, cap):
    """At least one item larger than the cap was returned alone."""
    big = [p for p in pages if len(p) == 1 and item_bytes(p[0]) > cap]
    assert big, "no page held an item larger than the cap alone: %r" % (
        [[item_bytes(x) for x in p] for p in pages],)


# ---- the steps endpoint pages ----------------------------------------------------------

def _history_script(n_steps, flaky):
    """cont for steps 0..n_steps-2 (503 on the first attempt of the steps in
    `flaky`), succeed at the last step."""
    def answer(req):
        if req.step in flaky and req.attempt == 1:
            return Reply(503, body=b"busy")
        if req.step < n_steps - 1:
            return cont({"n": req.step + 1})
        return succeed({"steps": n_steps})
    return answer


def test_steps_page_oldest_first_across_retries_and_generations(api, webhook):
    n = 30
    flaky = {3, 10, 17, 24}
    webhook.route("/steps", _history_script(n, flaky))
    api.put_workflow("wf", webhook.url(), max_attempts=3)
    rid = api.submit("wf", input={"n": 0})["run_id"]
    assert api.wait_terminal(rid, timeout=60)["status"] == "succeeded"
    r = api.post("/v1/runs/%s/rerun" % q(rid), {"from_step": n - 3})
    assert r.status == 201, r
    assert api.wait_terminal(rid, timeout=60)["generation"] == 2

    # Without parameters: the whole history at once, as before, and no cursor.
    r = api.get("/v1/runs/%s/steps" % q(rid))
    assert r.status == 200, r
    assert set(r.body) == {"steps", "next_cursor"}, r.body.keys()
    assert r.body["next_cursor"] is None
    full = r.body["steps"]
    want = [(1, s, a) for s in range(n) for a in ((1, 2) if s in flaky else (1,))]
    want += [(2, s, 1) for s in range(n - 3, n)]
    assert [(x["generation"], x["step"], x["attempt"]) for x in full] == want, "oldest first"

    for limit in (1, 4, 7, len(full) - 1, len(full)):
        pages = walk(api, "/v1/runs/%s/steps" % q(rid), "steps", limit=limit)
        assert [len(p) for p in pages[:-1]] == [limit] * (len(pages) - 1), "limit %d" % limit
        assert 1 <= len(pages[-1]) <= limit
        got = [x for p in pages for x in p]
        assert got == full, "limit %d: paging lost, repeated or reordered attempts" % limit


def test_steps_of_a_run_without_history_and_of_no_run(api):
    api.put_workflow("wf", "http://127.0.0.1:9/never")
    rid = api.submit("wf", delay_ms=PARKED)["run_id"]
    r = api.get("/v1/runs/%s/steps" % q(rid), params={"limit": 5})
    assert r.status == 200 and r.body == {"steps": [], "next_cursor": None}, r
    assert_error(api.get("/v1/runs/no-such-run/steps"), 404, "not_found", "no-such-run")
    assert_error(api.get("/v1/runs/no-such-run/steps", params={"limit": 3}), 404, "not_found")


def test_steps_reject_bad_limit_and_cursor(api, webhook):
    webhook.route("/steps", _history_script(3, set()))
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf")["run_id"]
    api.wait_terminal(rid)
    path = "/v1/runs/%s/steps" % q(rid)
    for limit in ("0", "1001", "-1", "x", "1.5"):
        assert_error(api.get(path, params={"limit": limit}), 400, "invalid_argument", "limit")
    api.submit("wf", delay_ms=PARKED)
    runs_cursor = api.get("/v1/runs", params={"limit": 1}).body["next_cursor"]
    assert runs_cursor, "a second run gives the run list a cursor"

    def cur(raw):
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    for bad in ("garbage!!", runs_cursor, cur(b"1|x.1"), cur(b"1|1.2.3"), cur(b"1|-1.0"),
                cur(b"1|1."), cur(b"1| 1.1"), cur(b"1|1.+1"), cur(b"99999999999|1.1"), cur(b"1|99999999999.1"), cur(b"1|\xff")):
        assert_error(api.get(path, params={"cursor": bad}), 400, "invalid_argument", "cursor")
    # A cursor of this list is good.
    r = api.get(path, params={"limit": 1})
    assert r.status == 200 and r.body["next_cursor"], r
    r = api.get(path, params={"limit": 1, "cursor": r.body["next_cursor"]})
    assert r.status == 200 and [s["step"] for s in r.body["steps"]] == [1], r


# ---- the byte cap, on every list --------------------------------------------------------

@pytest.mark.service_env(HOOKFLOW_MAX_PAGE_BYTES=str(CAP))
def test_runs_list_stops_a_page_at_the_byte_cap(api):
    api.put_workflow("big", "http://127.0.0.1:9/never")
    ids = []
    for i, size in enumerate(SIZES):
        ids.append(api.submit("big", run_id="cap-%02d" % i, input="x" * size, delay_ms=PARKED)["run_id"])
    for limit in (100, 3):
        pages = walk(api, "/v1/runs", "runs", workflow="big", limit=limit)
        got = [r["run_id"] for r in assert_capped(pages, CAP, limit)]
        assert got == ids[::-1], "limit %d: every run once, newest first: %r" % (limit, got)
        assert len(pages) > len(SIZES) // limit, "limit %d: the cap never ended a page" % limit
        assert_alone(pages, CAP)


@pytest.mark.service_env(HOOKFLOW_MAX_PAGE_BYTES=str(CAP))
def test_steps_stop_a_page_at_the_byte_cap(api, webhook):
    def answer(req):
        if req.step < len(SIZES) - 1:
            return cont("y" * SIZES[req.step + 1])
        return succeed("done")
    webhook.route("/steps", answer)
    api.put_workflow("wf", webhook.url())
    rid = api.submit("wf", input="y" * SIZES[0])["run_id"]
    assert api.wait_terminal(rid, timeout=30)["status"] == "succeeded"
    pages = walk(api, "/v1/runs/%s/steps" % q(rid), "steps")
    got = assert_capped(pages, CAP, 1000)
    assert [s["step"] for s in got] == list(range(len(SIZES)))
    assert [len(s["payload"]) for s in got] == SIZES
    assert_alone(pages, CAP)


@pytest.mark.service_env(HOOKFLOW_MAX_PAGE_BYTES=str(CAP))
def test_dead_letters_stop_a_page_at_the_byte_cap(api, webhook):
    webhook.route("/steps", lambda req: Reply(500, body=b"down"))
    api.put_workflow("dl", webhook.url(), max_attempts=1)
    ids = [api.submit("dl", run_id="dl-%02d" % i, input="z" * size)["run_id"] for i, size in enumerate(SIZES)]
    for rid in ids:
        assert api.wait_terminal(rid)["status"] == "failed"
    pages = walk(api, "/v1/dead-letters", "dead_letters", workflow="dl")
    got = assert_capped(pages, CAP, 100)
    assert sorted(d["run_id"] for d in got) == ids and len(got) == len(ids)
    assert_alone(pages, CAP)


@pytest.mark.service_env(HOOKFLOW_MAX_PAGE_BYTES=str(CAP))
def test_kv_list_stops_a_page_at_the_byte_cap(api):
    keys = ["cap/%02d" % i for i in range(len(SIZES))]
    for key, size in zip(keys, SIZES):
        kv_put(api, key, "v" * size)
    pages = walk(api, "/v1/kv", "items", prefix="cap/")
    got = assert_capped(pages, CAP, 100)
    assert [x["key"] for x in got] == keys
    assert_alone(pages, CAP)


@pytest.mark.service_env(HOOKFLOW_MAX_PAGE_BYTES=str(CAP))
def test_group_members_stop_a_page_at_the_byte_cap(api, webhook):
    webhook.route("/steps", lambda req: succeed("r" * req.field("payload")))
    api.put_workflow("wf", webhook.url())
    members = [{"key": "m%02d" % i, "input": size} for i, size in enumerate(SIZES)]
    r = put_group(api, "g-cap", "wf", members)
    assert r.status == 201, r
    wait_group_terminal(api, "g-cap")
    pages = walk(api, "/v1/groups/g-cap", "members", limit=100)
    got = assert_capped(pages, CAP, 100)
    assert [m["key"] for m in got] == [m["key"] for m in members]
    assert [len(m["result"]) for m in got] == SIZES
    assert_alone(pages, CAP)


@pytest.mark.service_env(HOOKFLOW_MAX_PAGE_BYTES=str(CAP))
def test_workflows_list_stops_a_page_at_the_byte_cap(api):
    # A workflow is small; long callback URLs make a few of them pass the cap.
    names = []
    for i, size in enumerate([10, 1900, 1900, 300, 1500, 50, 1900, 1000, 10, 10]):
        name = "wf-%02d" % i
        api.put_workflow(name, "http://127.0.0.1:9/never", callback_url="http://127.0.0.1:9/" + "c" * size)
        names.append(name)
    pages = walk(api, "/v1/workflows", "workflows")
    got = assert_capped(pages, CAP, 100)
    assert [w["name"] for w in got] == names
    assert len(pages) > 1


def test_the_default_cap_is_4_mib(api):
    """With HOOKFLOW_MAX_PAGE_BYTES unset, runs of 900 kB inputs come four to
    a page although limit allows 100, and the answer stays under 4 MiB."""
    api.put_workflow("big", "http://127.0.0.1:9/never")
    ids = [api.submit("big", run_id="big-%d" % i, input="x" * 900000, delay_ms=PARKED)["run_id"]
           for i in range(9)]
    r = api.get("/v1/runs", params={"workflow": "big", "limit": 100})
    assert r.status == 200, r
    assert len(r.body["runs"]) == 4, "4 x 900 kB fit in 4 MiB, 5 do not: %d" % len(r.body["runs"])
    assert r.body["next_cursor"]
    assert len(r.raw) <= 4 * 1024 * 1024, len(r.raw)
    pages = walk(api, "/v1/runs", "runs", workflow="big", limit=100)
    got = [x["run_id"] for x in assert_capped(pages, 4 * 1024 * 1024, 100)]
    assert got == ids[::-1], "every run once, newest first"
    assert [len(p) for p in pages] == [4, 4, 1]


@pytest.mark.parametrize("value", ["0", "1023", "1073741825", "4MiB", "-1"])
def test_a_bad_page_cap_stops_the_start_naming_the_variable(services, value):
    svc = services.new(HOOKFLOW_MAX_PAGE_BYTES=value)
    svc.start(wait_ready=False)
    code = svc.wait_exit(15)
    assert code is not None and code != 0, "hookflow started with HOOKFLOW_MAX_PAGE_BYTES=%s" % value
    assert "HOOKFLOW_MAX_PAGE_BYTES" in svc.log_text()
