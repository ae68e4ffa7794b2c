"""Schedules (issue 16: PUT/GET/DELETE /v1/schedules/{id}, GET /v1/schedules,
POST /v1/schedules/{id}/pause, /resume, /trigger and /backfill; the runs a
schedule starts; HOOKFLOW_CLOCK_OFFSET_MS, the test clock).

What these tests prove, against the real binary, PostgreSQL and webhook servers:

- PUT creates (201) and replaces (200) a schedule; GET shows every setting
  with its default, next_fire_times (10 RFC 3339 UTC times, read in the
  schedule's IANA zone, the same as Python's zoneinfo gives; still listed
  while paused; fewer when end_at cuts them), recent_runs and the counts
  fired / skipped / missed. A replaced schedule keeps its counts and recent
  runs and its next fire time is recomputed from now. GET /v1/schedules pages
  by id; DELETE is 204, then 404.
- A fire time's run is "<id>-<YYYYMMDDTHHMMSSZ>" and carries "schedule":
  {"id", "fire_time"} (null on other runs) and the schedule's run settings.
- Exactly one run per fire time: with two instances on one database, and
  across a SIGKILL during the firing (the fire times of the downtime are
  caught up once each).
- Overlap, while the previous run is held by its webhook: skip (counted
  skipped, one run active), buffer_one (one waits, starts when the active one
  ends, the others are skipped), buffer_all (all wait and run one at a time,
  in order), cancel_other (the active run is cancelled, then the next one
  starts), allow_all (several active at once).
- Downtime: fire times older than catchup_window_ms when hookflow gets to
  them are counted missed and start no run; the newer ones run.
- pause (with a note) stops firing while the clock moves on and still lists
  next_fire_times; resume restarts it; trigger starts one run now
  ("<id>-trigger-<ULID>"), also while paused, under the overlap policy.
- backfill {"from", "to"} starts one run per fire time in [from, to) (DST
  gaps and repeated hours as the live schedule fires them), with overlap
  allow_all unless told; at most 1000 fire times.
- Bad input is 400 naming the field (cron errors with their position, the
  unknown zone by name) and creates or changes nothing; unknown schedules 404.
- /metrics counts fires (hookflow_schedule_fires_total), skips and misses.
- jitter_ms delays each fire time's run by less than jitter_ms.

Time: live firing uses every_ms schedules of 1000 ms (a few seconds of real
waiting); cron schedules are moved to their fire times by restarting the
service with HOOKFLOW_CLOCK_OFFSET_MS (the schedules' clock, test-only).
Expected cron fire times are computed here with zoneinfo (cron_fire_times).
"""

import datetime
import signal
import threading
import time
import urllib.parse
import zoneinfo

import pytest

from harness import (TS_RE, ULID_RE, Hang, assert_error, iso_to_epoch, succeed, wait_until)

WF = "wf"
LONG_MS = 30000                 # a step timeout no held call reaches
MINUTE_MS = 60000
ON_TIME_MS = 2000               # SCHEDULER_ON_TIME_MS: a fire time this late is on time
QUARTER_MS = 15 * MINUTE_MS
TERMINAL = ("succeeded", "failed", "cancelled")
ACTIVE = ("pending", "scheduled", "waiting", "running", "cancelling")
FIRES = "hookflow_schedule_fires_total"
SKIPS = "hookflow_schedule_skips_total"
MISSES = "hookflow_schedule_misses_total"

# GET /v1/schedules/{id} of a schedule given only workflow and cron: every
# setting with its default (openapi, SCHEDULES spec).
DEFAULTS = {
    "every_ms": None, "timezone": "UTC", "input": None, "headers": {}, "priority": None,
    "max_attempts": None, "concurrency_key": None, "overlap": "skip", "catchup_window_ms": 60000,
    "jitter_ms": 0, "start_at": None, "end_at": None, "paused": False, "note": None,
    "recent_runs": [], "fired": 0, "skipped": 0, "missed": 0,
}


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def q(s):
    return urllib.parse.quote(s, safe="")


def ms(ts):
    """An RFC 3339 timestamp with milliseconds as epoch milliseconds."""
    return round(iso_to_epoch(ts) * 1000)


def now_ms():
    return int(time.time() * 1000)


def iso(t_ms):
    """Epoch milliseconds as the API writes times: RFC 3339 UTC with milliseconds."""
    dt = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(milliseconds=t_ms)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t_ms % 1000)


def fire_run_id(sid, fire_ms):
    """The run id of schedule `sid`'s fire time: "<id>-<YYYYMMDDTHHMMSSZ>" (UTC)."""
    return "%s-%s" % (sid, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(fire_ms // 1000)))


def put_schedule(api, sid, expect=201, **body):
    """PUT /v1/schedules/{sid} of workflow WF (unless body names another)
    with `body`; asserts `expect` (None: no check); returns the response."""
    body.setdefault("workflow", WF)
    r = api.put("/v1/schedules/" + q(sid), body)
    if expect is not None:
        assert r.status == expect, "PUT schedule %s %r: %r" % (sid, body, r)
    return r


def schedule(api, sid):
    r = api.get("/v1/schedules/" + q(sid))
    assert r.status == 200, "GET schedule %s: %r" % (sid, r)
    return r.body


def action(api, sid, name, body=None):
    """POST /v1/schedules/{sid}/{name} (pause, resume, trigger, backfill)."""
    return api.post("/v1/schedules/%s/%s" % (q(sid), name), body)


def pause(api, sid, **body):
    r = action(api, sid, "pause", body or None)
    assert r.status == 200 and r.body["paused"] is True, "pause %s: %r" % (sid, r)
    return r.body


def resume(api, sid, **body):
    r = action(api, sid, "resume", body or None)
    assert r.status == 200 and r.body["paused"] is False, "resume %s: %r" % (sid, r)
    return r.body


def run_or_none(api, run_id):
    r = api.get("/v1/runs/" + q(run_id))
    assert r.status in (200, 404), "GET run %s: %r" % (run_id, r)
    return r.body if r.status == 200 else None


def runs_of(api, sid, workflow=WF):
    """The runs schedule `sid` started (fire times and triggers), from GET
    /v1/runs?workflow= (there is no schedule filter): their ids begin with
    "<sid>-"."""
    return [r for r in api.runs(workflow=workflow) if r["run_id"].startswith(sid + "-")]


def runs_by_schedule(api, ids, workflow=WF):
    """{schedule id: its runs} for schedules `ids`, from one listing."""
    out = {sid: [] for sid in ids}
    for r in api.runs(workflow=workflow):
        sid = r["run_id"].rsplit("-", 1)[0]
        if sid in out:
            out[sid].append(r)
    return out


def fire_ms_of(run):
    return ms(run["schedule"]["fire_time"])


def by_fire_time(runs):
    return sorted(runs, key=fire_ms_of)


def assert_fire_run(run, sid):
    """A run of one of `sid`'s fire times: its id derives from the fire time
    and its "schedule" names both."""
    sched = run.get("schedule")
    assert isinstance(sched, dict) and set(sched) == {"id", "fire_time"}, run
    assert sched["id"] == sid and TS_RE.match(sched["fire_time"] or ""), run
    assert run["run_id"] == fire_run_id(sid, fire_ms_of(run)), run


def assert_consecutive(fires, step_ms, what):
    """Fire times (sorted epoch ms) one `step_ms` apart: none missing, none twice."""
    gaps = [(iso(a), iso(b)) for a, b in zip(fires, fires[1:]) if b - a != step_ms]
    assert not gaps, "%s: fire times not %d ms apart (a gap or a duplicate): %r" % (what, step_ms, gaps)


def hold_steps(webhook, release):
    """Every step call is held until `release` is set, then succeeds."""
    webhook.route("/steps", lambda req: Hang(release=release, then=succeed({"run": req.run_id}), max_s=120))


def metric(api, name):
    return api.metrics().get(name, 0.0)


def pause_workflow(api, name=WF):
    r = api.post("/v1/workflows/%s/pause" % q(name))
    assert r.status == 200, r


# Cron fire times, computed independently of the service: every UTC minute
# is read in the zone's local time (zoneinfo); a local minute that matches
# fires at that instant, unless it is the second occurrence of a repeated
# local time (fold 1); local minutes skipped by a forward jump (a DST gap)
# that match fire once, at the first instant after the gap.

_DOW = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
_MON = {m: i + 1 for i, m in enumerate(("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP",
                                        "OCT", "NOV", "DEC"))}
_FIELDS = ((0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, _MON), (0, 7, _DOW))
_MACROS = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
           "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *",
           "@annually": "0 0 1 1 *"}


def _parse_cron(expr):
    """(minutes, hours, days, months, weekdays) as sets, and whether day of
    month / day of week are restricted (do not start with '*')."""
    fields = _MACROS.get(expr, expr).split()
    assert len(fields) == 5, expr
    sets = []
    for text, (lo, hi, names) in zip(fields, _FIELDS):
        def val(s):
            return names[s.upper()] if s.upper() in names else int(s)
        values = set()
        for item in text.split(","):
            rng, slash, step = item.partition("/")
            if rng == "*":
                a, b = lo, hi
            elif "-" in rng:
                a, b = (val(x) for x in rng.split("-"))
            else:
                a = val(rng)
                b = hi if slash else a
            values.update(range(a, b + 1, int(step) if slash else 1))
        sets.append(values)
    if 7 in sets[4]:
        sets[4] = (sets[4] - {7}) | {0}
    return sets, not fields[2].startswith("*"), not fields[4].startswith("*")


def _cron_matches(parsed, wall):
    (mins, hours, days, months, dows), dom_r, dow_r = parsed
    if wall.minute not in mins or wall.hour not in hours or wall.month not in months:
        return False
    dom_ok, dow_ok = wall.day in days, (wall.weekday() + 1) % 7 in dows
    return (dom_ok or dow_ok) if (dom_r and dow_r) else (dom_ok and dow_ok)


def cron_fire_times(expr, zone, after_ms, count=10, until_ms=None):
    """The first `count` fire times (epoch ms) of cron `expr` in IANA zone
    `zone` strictly after `after_ms` (and before `until_ms` when given)."""
    parsed = _parse_cron(expr)
    tz = zoneinfo.ZoneInfo(zone)

    def wall(t):
        return datetime.datetime.fromtimestamp(t / 1000, tz)

    out = []
    t = (after_ms // MINUTE_MS + 1) * MINUTE_MS
    prev = wall(t - MINUTE_MS).replace(tzinfo=None, fold=0)
    horizon = t + 8 * 366 * 86400000
    while len(out) < count and t < horizon and (until_ms is None or t < until_ms):
        local = wall(t)
        here = local.replace(tzinfo=None, fold=0)
        fire = local.fold == 0 and _cron_matches(parsed, here)
        gap = prev + datetime.timedelta(minutes=1)
        while not fire and gap < here:  # local minutes a forward jump skipped
            fire = _cron_matches(parsed, gap)
            gap += datetime.timedelta(minutes=1)
        if fire:
            out.append(t)
        prev = here
        t += MINUTE_MS
    return out


def test_the_python_cron_reference_agrees_with_known_fire_times():
    # The reference the tests compare next_fire_times with, on fixed dates:
    # Paris leaves 02:00-03:00 out on 2024-03-31 and has it twice on
    # 2024-10-27.
    paris = cron_fire_times("30 2 * * *", "Europe/Paris", ms("2024-03-29T00:00:00.000Z"), 4)
    assert [iso(t) for t in paris] == ["2024-03-29T01:30:00.000Z", "2024-03-30T01:30:00.000Z",
                                       "2024-03-31T01:00:00.000Z", "2024-04-01T00:30:00.000Z"]
    fall = cron_fire_times("30 2 * * *", "Europe/Paris", ms("2024-10-26T12:00:00.000Z"), 2)
    assert [iso(t) for t in fall] == ["2024-10-27T00:30:00.000Z", "2024-10-28T01:30:00.000Z"]
    week = cron_fire_times("*/15 9-17 * * MON-FRI", "Europe/Paris", ms("2024-06-07T15:50:00.000Z"), 3)
    # Friday 17:50 Paris (CEST): the last of the week is 17:45; then Monday 09:00.
    assert [iso(t) for t in week] == ["2024-06-10T07:00:00.000Z", "2024-06-10T07:15:00.000Z",
                                      "2024-06-10T07:30:00.000Z"]


# --------------------------------------------------------------------------
# The resource: create, replace, read, list, delete
# --------------------------------------------------------------------------

def test_put_creates_then_replaces_and_get_shows_every_field_with_its_defaults(api, webhook):
    api.put_workflow(WF, webhook.url())
    cron = "*/15 9-17 * * MON-FRI"
    before = now_ms()
    created = put_schedule(api, "office-hours", expect=201, cron=cron, timezone="Europe/Paris")
    got = schedule(api, "office-hours")
    after = now_ms()

    expected = dict(DEFAULTS, id="office-hours", workflow=WF, cron=cron, timezone="Europe/Paris")
    for key, value in expected.items():
        assert key in got and got[key] == value, (key, got)
    assert TS_RE.match(got["created_at"]) and TS_RE.match(got["updated_at"]), got
    # next_fire_times: the next ten, from the service's now (between the two
    # readings of the clock around the calls), read in Paris time.
    fires = got["next_fire_times"]
    assert len(fires) == 10 and all(TS_RE.match(t) for t in fires), fires
    assert fires in ([iso(t) for t in cron_fire_times(cron, "Europe/Paris", before)],
                     [iso(t) for t in cron_fire_times(cron, "Europe/Paris", after)]), fires
    # The PUT answers the schedule as GET shows it.
    assert isinstance(created.body, dict), created
    for key in expected:
        assert created.body.get(key) == got[key], (key, created.body)

    # Replacing sets every field (the ones not given back to their defaults);
    # created_at stays.
    start = (now_ms() // MINUTE_MS + 60) * MINUTE_MS  # a whole minute about an hour ahead
    body = {"every_ms": MINUTE_MS, "input": {"report": "daily"}, "headers": {"x-team": "ops"},
            "priority": 5, "max_attempts": 2, "concurrency_key": "reports", "overlap": "buffer_all",
            "catchup_window_ms": 0, "jitter_ms": 100, "start_at": iso(start),
            "end_at": iso(start + 4 * MINUTE_MS + 30000), "paused": True, "note": "\u00e9" * 512}
    replaced = put_schedule(api, "office-hours", expect=200, **body)
    assert isinstance(replaced.body, dict) and replaced.body.get("id") == "office-hours", replaced
    got2 = schedule(api, "office-hours")
    for key, value in dict(DEFAULTS, id="office-hours", workflow=WF, cron=None, **body).items():
        assert key in got2 and got2[key] == value, (key, got2)
    assert got2["created_at"] == got["created_at"], got2
    assert ms(got2["updated_at"]) >= ms(got["updated_at"]), got2
    # Paused, its fire times are still listed; end_at cuts them to five.
    assert got2["next_fire_times"] == [iso(start + i * MINUTE_MS) for i in range(5)], got2

    # A schedule created paused lists its next fire times too.
    put_schedule(api, "frozen", cron="0 12 * * *", paused=True)
    frozen = schedule(api, "frozen")
    assert frozen["paused"] is True, frozen
    assert len(frozen["next_fire_times"]) == 10, frozen
    assert [ms(t) for t in frozen["next_fire_times"]] in (cron_fire_times("0 12 * * *", "UTC", before),
                                                          cron_fire_times("0 12 * * *", "UTC", now_ms())), frozen


def test_the_list_pages_by_id_and_delete_is_204_then_404(api, webhook):
    api.put_workflow(WF, webhook.url())
    ids = ["b-2", "a-1", "c_3", "A_0", "d-4"]
    for sid in ids:
        put_schedule(api, sid, cron="0 0 * * *", paused=sid == "c_3")

    seen, params, pages = [], {"limit": 2}, 0
    while True:
        r = api.get("/v1/schedules", params=params)
        assert r.status == 200, r
        assert isinstance(r.body, dict) and set(r.body) == {"schedules", "next_cursor"}, r
        page = r.body["schedules"]
        assert len(page) <= 2, page
        for item in page:
            assert item["workflow"] == WF and item["cron"] == "0 0 * * *", item
        seen.extend(item["id"] for item in page)
        pages += 1
        if not r.body["next_cursor"]:
            break
        params = {"limit": 2, "cursor": r.body["next_cursor"]}
    assert seen == sorted(ids), "ordered by id, each once, the paused one too: %r" % seen
    assert pages >= 3, pages

    r = api.delete("/v1/schedules/" + q("c_3"))
    assert r.status == 204 and r.raw == b"", r
    assert_error(api.get("/v1/schedules/" + q("c_3")), 404, "not_found")
    assert_error(api.delete("/v1/schedules/" + q("c_3")), 404, "not_found")
    r = api.get("/v1/schedules", params={"limit": 100})
    assert r.status == 200 and [s["id"] for s in r.body["schedules"]] == sorted(set(ids) - {"c_3"}), r
    assert r.body["next_cursor"] is None, r


def test_a_replaced_schedule_keeps_its_counts_and_recent_runs_and_recomputes_its_next_fire_time(api, webhook):
    webhook.route("/steps", lambda req: succeed())
    api.put_workflow(WF, webhook.url())
    put_schedule(api, "tick", every_ms=1000, overlap="allow_all")
    wait_until(lambda: schedule(api, "tick")["fired"] >= 12, timeout=40,
               message=lambda: "12 fires: %r" % schedule(api, "tick"))
    before = pause(api, "tick")
    runs = by_fire_time(runs_of(api, "tick"))
    assert len(runs) == before["fired"], (len(runs), before)

    # recent_runs: the last ten, newest first.
    recent = before["recent_runs"]
    assert [(x["run_id"], x["fire_time"]) for x in recent] == \
        [(r["run_id"], r["schedule"]["fire_time"]) for r in reversed(runs[-10:])], recent
    for x in recent:
        assert set(x) == {"run_id", "fire_time", "status"} and x["status"] in TERMINAL + ACTIVE, x

    t0 = now_ms()
    put_schedule(api, "tick", expect=200, every_ms=3600000, overlap="allow_all")
    after = schedule(api, "tick")
    assert (after["fired"], after["skipped"], after["missed"]) == \
        (before["fired"], before["skipped"], before["missed"]), after
    assert [x["run_id"] for x in after["recent_runs"]] == [x["run_id"] for x in recent], after
    nxt = [ms(t) for t in after["next_fire_times"]]
    assert len(nxt) == 10 and t0 < nxt[0] <= now_ms() + 3600000, after["next_fire_times"]
    assert_consecutive(nxt, 3600000, "next_fire_times after the replace")


# --------------------------------------------------------------------------
# The runs of fire times
# --------------------------------------------------------------------------

def test_a_cron_schedule_starts_the_run_of_its_fire_time_when_the_clock_reaches_it(services, webhook):
    svc = services.start()
    webhook.route("/steps", lambda req: succeed({"fire": req.json["payload"]}))
    svc.api.put_workflow(WF, webhook.url())
    t0 = now_ms()
    put_schedule(svc.api, "quarter", cron="*/15 * * * *", input={"report": "q"})
    fire = ms(schedule(svc.api, "quarter")["next_fire_times"][0])
    assert fire in (cron_fire_times("*/15 * * * *", "UTC", t0, 1)[0],
                    cron_fire_times("*/15 * * * *", "UTC", now_ms(), 1)[0]), iso(fire)

    # Move the schedules' clock one second past the fire time.
    svc.restart(HOOKFLOW_CLOCK_OFFSET_MS=str(fire - now_ms() + 1000))
    rid = fire_run_id("quarter", fire)
    assert rid == "quarter-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(fire / 1000))
    wait_until(lambda: run_or_none(svc.api, rid), timeout=15, message="run %s" % rid)
    run = svc.api.wait_terminal(rid)
    assert run["status"] == "succeeded" and run["result"] == {"fire": {"report": "q"}}, run
    assert run["schedule"] == {"id": "quarter", "fire_time": iso(fire)}, run

    s = schedule(svc.api, "quarter")
    assert (s["fired"], s["skipped"], s["missed"]) == (1, 0, 0), s
    assert s["recent_runs"] == [{"run_id": rid, "fire_time": iso(fire), "status": "succeeded"}], s
    assert s["next_fire_times"][0] == iso(fire + QUARTER_MS), s
    assert [r["run_id"] for r in runs_of(svc.api, "quarter")] == [rid]


def test_a_scheduled_run_carries_its_schedule_and_the_schedules_run_settings(api, webhook):
    webhook.route("/steps", lambda req: succeed())
    wf = api.put_workflow(WF, webhook.url(), max_attempts=4, priority=3)
    plain = api.submit(WF)["run_id"]
    put_schedule(api, "settings", every_ms=1000, input={"n": 1}, headers={"x-team": "ops"},
                 priority=9, concurrency_key="nightly")
    put_schedule(api, "inherits", every_ms=1000)
    for sid in ("settings", "inherits"):
        wait_until(lambda: runs_of(api, sid), timeout=15, message="a run of %s" % sid)
    pause(api, "settings")
    pause(api, "inherits")

    run = api.run(runs_of(api, "settings")[0]["run_id"])
    assert_fire_run(run, "settings")
    assert run["input"] == {"n": 1} and run["headers"] == {"x-team": "ops"}, run
    assert run["priority"] == 9 and run["concurrency_key"] == "nightly", run
    assert run["max_attempts"] == wf["max_attempts"] == 4, "max_attempts defaults to the workflow's: %r" % run
    other = api.run(runs_of(api, "inherits")[0]["run_id"])
    assert_fire_run(other, "inherits")
    assert other["priority"] == 3 and other["max_attempts"] == 4 and other["input"] is None, other

    # The list shows the same object as GET /v1/runs/{id}; a run submitted
    # through POST /v1/runs has "schedule": null.
    listed = {r["run_id"]: r for r in api.runs(workflow=WF)}
    assert listed[run["run_id"]]["schedule"] == run["schedule"]
    assert "schedule" in listed[plain] and listed[plain]["schedule"] is None, listed[plain]
    assert api.run(plain)["schedule"] is None


def test_two_instances_start_exactly_one_run_per_fire_time(services, webhook):
    a = services.start()
    b = services.start()
    webhook.route("/steps", lambda req: succeed({"run": req.run_id}))
    a.api.put_workflow(WF, webhook.url())
    put_schedule(a.api, "tick", every_ms=1000, overlap="allow_all")

    wait_until(lambda: schedule(b.api, "tick")["fired"] >= 6, timeout=30,
               message=lambda: "6 fire times: %r" % schedule(b.api, "tick"))
    pause(b.api, "tick")  # no fire time after this
    s = schedule(a.api, "tick")
    runs = by_fire_time(runs_of(b.api, "tick"))
    for run in runs:
        assert_fire_run(run, "tick")
    fires = [fire_ms_of(r) for r in runs]
    assert len(runs) == s["fired"] >= 6, (len(runs), s)
    assert (s["skipped"], s["missed"]) == (0, 0), s
    assert_consecutive(fires, 1000, "two instances")

    # Each run ran once, and the instances' fire counters add up to the
    # fire times: none was fired by both.
    for run in runs:
        done = a.api.wait_terminal(run["run_id"])
        assert done["status"] == "succeeded", done
    calls = [req.run_id for req in webhook.requests(path="/steps")]
    assert sorted(calls) == sorted(r["run_id"] for r in runs), calls
    wait_until(lambda: metric(a.api, FIRES) + metric(b.api, FIRES) == len(runs), timeout=5,
               message=lambda: "fires_total of a + b (%s + %s) == %d"
               % (metric(a.api, FIRES), metric(b.api, FIRES), len(runs)))


SCHEDULES_KILLED = 20


def test_sigkill_while_firing_loses_and_repeats_no_fire_time_of_the_catchup_window(services, webhook):
    svc = services.start()
    api = svc.api
    webhook.route("/steps", lambda req: succeed())
    api.put_workflow(WF, webhook.url())
    ids = ["k%02d" % i for i in range(SCHEDULES_KILLED)]
    for sid in ids:
        put_schedule(api, sid, every_ms=1000, overlap="allow_all")
    wait_until(lambda: all(len(rs) >= 2 for rs in runs_by_schedule(api, ids).values()), timeout=30,
               interval=0.2, message="two fire times of every schedule")

    # Aim the kill 5 ms after the next whole second (where every_ms fire times
    # fall when anchored at the epoch), in the middle of the pass that fires
    # 20 schedules; wherever it lands, the assertions below hold.
    target = (time.time() // 1 + 1) + 0.005
    wait_until(lambda: time.time() >= target, timeout=3, interval=0.001, message="the next whole second")
    killed_at = now_ms()
    assert svc.kill() == -signal.SIGKILL
    # Down for about three fire times.
    wait_until(lambda: now_ms() >= killed_at + 3000, timeout=5, message="three seconds of downtime")
    restarted_at = now_ms()
    svc.restart(sig=None)
    live = now_ms() + 1000
    wait_until(lambda: all(any(fire_ms_of(r) >= live for r in rs) for rs in runs_by_schedule(api, ids).values()),
               timeout=30, interval=0.2, message="every schedule firing again after the restart")
    for sid in ids:
        pause(api, sid)

    runs_of_each = runs_by_schedule(api, ids)
    for sid in ids:
        s = schedule(api, sid)
        runs = by_fire_time(runs_of_each[sid])
        for run in runs:
            assert_fire_run(run, sid)
        fires = [fire_ms_of(r) for r in runs]
        assert_consecutive(fires, 1000, sid)
        assert len(runs) == s["fired"], (sid, len(runs), s)
        assert (s["skipped"], s["missed"]) == (0, 0), (sid, s)
        # The fire times of the downtime (inside the 60 s catch-up window) ran.
        down = [t for t in fires if killed_at < t < restarted_at]
        assert len(down) >= 2, (sid, [iso(t) for t in fires], iso(killed_at), iso(restarted_at))


def test_catchup_after_downtime_runs_the_window_and_counts_the_older_fire_times_missed(services, webhook):
    svc = services.start()
    webhook.route("/steps", lambda req: succeed())
    svc.api.put_workflow(WF, webhook.url())
    # Every minute from a whole minute two to three minutes ahead: nothing
    # fires before the service is stopped.
    start = (now_ms() // MINUTE_MS + 3) * MINUTE_MS
    put_schedule(svc.api, "minutely", cron="* * * * *", catchup_window_ms=120000, overlap="allow_all",
                 start_at=iso(start))
    assert schedule(svc.api, "minutely")["next_fire_times"][0] == iso(start)
    svc.stop()

    offset = 10 * MINUTE_MS
    svc.restart(HOOKFLOW_CLOCK_OFFSET_MS=str(offset))
    wait_until(lambda: schedule(svc.api, "minutely")["fired"] > 0, timeout=15, message="the catch-up")
    s = pause(svc.api, "minutely")
    runs = by_fire_time(runs_of(svc.api, "minutely"))
    for run in runs:
        assert_fire_run(run, "minutely")
    assert_consecutive([fire_ms_of(r) for r in runs], MINUTE_MS, "catch-up")

    # The catch-up pass started its runs in one transaction: they share its
    # created_at, which is its now on the database clock; its now on the
    # schedules' clock is that plus the offset.
    first_pass = min(ms(r["created_at"]) for r in runs)
    caught = [fire_ms_of(r) for r in runs if ms(r["created_at"]) == first_pass]
    now_then = first_pass + offset
    due = cron_fire_times("* * * * *", "UTC", start - 1, count=100, until_ms=now_then + 1)
    assert due[0] == start and len(due) >= 7, [iso(t) for t in due]
    # The window is measured from the fire time plus the scheduler's two
    # seconds of on-time grace (README "Schedules").
    limit = 120000 + ON_TIME_MS
    window = [t for t in due if now_then - t <= limit]
    older = [t for t in due if now_then - t > limit]
    assert len(caught) in (2, 3), [iso(t) for t in caught]
    # At most a millisecond of rounding between created_at and the pass's now.
    edge = {t for t in due if abs(now_then - t - limit) <= 1}
    assert set(caught) - set(window) <= edge, ([iso(t) for t in caught], [iso(t) for t in window])
    assert set(window) - set(caught) <= edge, ([iso(t) for t in caught], [iso(t) for t in window])
    assert older and s["missed"] == len(due) - len(caught), (s, [iso(t) for t in due])
    assert s["skipped"] == 0 and s["fired"] == len(runs), s
    # recent_runs newest first, also among runs started in one pass.
    recent = [ms(x["fire_time"]) for x in s["recent_runs"]]
    assert recent == sorted((fire_ms_of(r) for r in runs), reverse=True)[:10], s["recent_runs"]
    for t in due:
        if t not in caught:
            assert run_or_none(svc.api, fire_run_id("minutely", t)) is None, "a missed fire time ran: %s" % iso(t)
    wait_until(lambda: metric(svc.api, MISSES) == s["missed"], timeout=5,
               message=lambda: "misses_total %s == %d" % (metric(svc.api, MISSES), s["missed"]))


# --------------------------------------------------------------------------
# Overlap
# --------------------------------------------------------------------------

def overlap_setup(api, webhook, sid, overlap):
    """Workflow WF whose step calls are held until the returned event is set
    (then succeed); schedule `sid` every second under `overlap`. Returns
    (release event, the first run's id, its fire time)."""
    release = threading.Event()
    hold_steps(webhook, release)
    api.put_workflow(WF, webhook.url(), timeout_ms=LONG_MS, max_attempts=1)
    put_schedule(api, sid, every_ms=1000, overlap=overlap)
    (first,) = webhook.wait_requests(1, path="/steps", timeout=15)
    run = api.run(first.run_id)
    assert_fire_run(run, sid)
    return release, first.run_id, fire_ms_of(run)


def active_runs(api, sid):
    return [r for r in runs_of(api, sid) if r["status"] not in TERMINAL]


def test_overlap_skip_counts_skipped_fire_times_and_keeps_one_run_active(api, webhook):
    release, r1, f1 = overlap_setup(api, webhook, "skip", "skip")
    try:
        s = wait_until(lambda: (lambda x: x if x["skipped"] >= 3 else None)(schedule(api, "skip")), timeout=20,
                       message="three skipped fire times")
        assert s["fired"] == 1 and s["missed"] == 0, s
        assert [r["run_id"] for r in runs_of(api, "skip")] == [r1], "one run while it is active"
        skipped = s["skipped"]
        wait_until(lambda: metric(api, SKIPS) >= skipped, timeout=5, message="skips_total")
    finally:
        release.set()
    assert api.wait_terminal(r1)["status"] == "succeeded"
    # The fire times handled while r1 was active started nothing...
    for i in range(1, skipped + 1):
        assert run_or_none(api, fire_run_id("skip", f1 + i * 1000)) is None, i
    # ...and firing goes on once it has ended.
    wait_until(lambda: len(runs_of(api, "skip")) >= 2, timeout=15, message="a run after r1 ended")
    later = [fire_ms_of(r) for r in runs_of(api, "skip") if r["run_id"] != r1]
    assert min(later) > f1 + skipped * 1000, [iso(t) for t in later]
    pause(api, "skip")


def test_overlap_buffer_one_starts_one_waiting_fire_after_the_active_run_and_skips_the_rest(api, webhook):
    release, r1, f1 = overlap_setup(api, webhook, "b1", "buffer_one")
    try:
        s = wait_until(lambda: (lambda x: x if x["skipped"] >= 2 else None)(schedule(api, "b1")), timeout=20,
                       message="two skipped fire times")
        # Handled in order: f1 started, f1 + 1 s waits, the next `skipped` ones
        # were skipped.
        assert s["fired"] == 1 and s["missed"] == 0, s
        assert [r["run_id"] for r in runs_of(api, "b1")] == [r1], "the waiting fire has no run yet"
        skipped = s["skipped"]
    finally:
        release.set()
    first = api.wait_terminal(r1)
    assert first["status"] == "succeeded", first
    buffered = fire_run_id("b1", f1 + 1000)
    wait_until(lambda: run_or_none(api, buffered), timeout=15, message="the buffered fire's run")
    second = api.wait_terminal(buffered)
    assert second["status"] == "succeeded", second
    assert_fire_run(second, "b1")
    assert fire_ms_of(second) == f1 + 1000
    assert ms(second["created_at"]) >= ms(first["finished_at"]), "started when the active run ended: %r" % second
    for i in range(2, skipped + 2):
        assert run_or_none(api, fire_run_id("b1", f1 + i * 1000)) is None, "fire time %d was skipped" % i
    pause(api, "b1")
    assert schedule(api, "b1")["skipped"] >= skipped


def assert_one_at_a_time(runs):
    """Runs (by fire time) that never overlapped: each started after the
    previous one ended, in fire-time order."""
    for prev, nxt in zip(runs, runs[1:]):
        assert prev["status"] in TERMINAL, ("two active at once", prev, nxt)
        assert ms(nxt["created_at"]) >= ms(prev["finished_at"]), ("overlapping runs", prev, nxt)


def test_overlap_buffer_all_keeps_every_fire_and_runs_them_in_order_one_at_a_time(api, webhook):
    release, r1, f1 = overlap_setup(api, webhook, "ball", "buffer_all")
    try:
        # Three more fire times come due while r1 is held.
        wait_until(lambda: now_ms() >= f1 + 3500, timeout=10, message="three more fire times")
        s = schedule(api, "ball")
        assert (s["fired"], s["skipped"], s["missed"]) == (1, 0, 0), s
        assert [r["run_id"] for r in runs_of(api, "ball")] == [r1], "the waiting fires have no run yet"
    finally:
        release.set()
    waiting = [fire_run_id("ball", f1 + i * 1000) for i in (1, 2, 3)]
    for rid in waiting:
        wait_until(lambda: run_or_none(api, rid), timeout=15, message="the buffered run %s" % rid)
        assert api.wait_terminal(rid)["status"] == "succeeded"
    pause(api, "ball")
    runs = by_fire_time(api.run(r["run_id"]) for r in runs_of(api, "ball"))
    assert [r["run_id"] for r in runs[:4]] == [r1] + waiting, [r["run_id"] for r in runs]
    first = runs[0]
    for run in runs[1:4]:
        assert ms(run["created_at"]) >= ms(first["finished_at"]), "it waited for r1: %r" % run
    assert_one_at_a_time(runs)
    assert_consecutive([fire_ms_of(r) for r in runs], 1000, "buffer_all")
    assert schedule(api, "ball")["skipped"] == 0


def test_overlap_cancel_other_cancels_the_active_run_then_starts_the_new_one(api, webhook):
    release, r1, f1 = overlap_setup(api, webhook, "co", "cancel_other")
    try:
        r2 = fire_run_id("co", f1 + 1000)
        (held2,) = webhook.wait_requests(1, path="/steps", run_id=r2, timeout=15)
        pause(api, "co")
        first = api.wait_terminal(r1)
        assert first["status"] == "cancelled" and first["cancel_requested"] is True, first
        (held1,) = webhook.requests(path="/steps", run_id=r1)
        assert held1.disconnected.wait(5), "r1's call was not aborted"
        second = api.run(r2)
        assert_fire_run(second, "co")
        assert ms(second["created_at"]) >= ms(first["finished_at"]), "r2 started before r1 ended: %r" % second
        runs = by_fire_time(api.run(r["run_id"]) for r in runs_of(api, "co"))
        assert_one_at_a_time(runs)
        assert all(r["status"] == "cancelled" for r in runs[:-1]), runs
        assert len(active_runs(api, "co")) == 1
        assert schedule(api, "co")["skipped"] == 0
    finally:
        release.set()


def test_overlap_allow_all_runs_several_at_once(api, webhook):
    release, r1, f1 = overlap_setup(api, webhook, "all", "allow_all")
    try:
        wait_until(lambda: len(webhook.requests(path="/steps")) >= 3, timeout=15, message="three held calls")
        held = {req.run_id for req in webhook.requests(path="/steps")}
        active = {r["run_id"]: r["status"] for r in active_runs(api, "all")}
        assert len(held) >= 3 and all(active.get(rid) == "running" for rid in held), (held, active)
        s = pause(api, "all")
        assert s["skipped"] == 0 and s["fired"] == len(runs_of(api, "all")), s
        assert_consecutive(sorted(fire_ms_of(r) for r in runs_of(api, "all")), 1000, "allow_all")
    finally:
        release.set()


# --------------------------------------------------------------------------
# pause, resume, trigger
# --------------------------------------------------------------------------

def test_pause_stops_firing_while_the_clock_moves_and_resume_restarts_it(services, webhook):
    svc = services.start()
    webhook.route("/steps", lambda req: succeed())
    svc.api.put_workflow(WF, webhook.url())
    put_schedule(svc.api, "p", cron="* * * * *", note="created")
    # A witness schedule on the same clock shows when the passes have run.
    put_schedule(svc.api, "witness", cron="* * * * *")

    paused = pause(svc.api, "p", note="deploy freeze")
    assert paused["note"] == "deploy freeze", paused
    # (A minute may have begun between the PUT and the pause: its run, if
    # any, came before the pause.)
    counts = (paused["fired"], paused["skipped"], paused["missed"])
    earlier = [r["run_id"] for r in runs_of(svc.api, "p")]

    # Three minutes later on the schedules' clock: the witness has run a fire
    # time still in the future of the real clock, p nothing.
    offset = 3 * MINUTE_MS
    svc.restart(HOOKFLOW_CLOCK_OFFSET_MS=str(offset))
    wait_until(lambda: any(fire_ms_of(r) > now_ms() for r in runs_of(svc.api, "witness")), timeout=15,
               message="the witness firing on the moved clock")
    before = now_ms() + offset
    s = schedule(svc.api, "p")
    assert s["paused"] is True and s["note"] == "deploy freeze", s
    assert (s["fired"], s["skipped"], s["missed"]) == counts, s
    assert [r["run_id"] for r in runs_of(svc.api, "p")] == earlier, "a paused schedule fired"
    # Its next fire times are still listed, from the schedules' clock.
    assert [ms(t) for t in s["next_fire_times"]] in (cron_fire_times("* * * * *", "UTC", before),
                                                     cron_fire_times("* * * * *", "UTC", now_ms() + offset)), s

    resumed_at = now_ms() + offset
    resumed = resume(svc.api, "p", note="thawed")
    assert resumed["note"] == "thawed" and resumed["paused"] is False, resumed

    # Three more minutes: p fires again, only fire times after its resume.
    offset2 = 6 * MINUTE_MS
    svc.restart(HOOKFLOW_CLOCK_OFFSET_MS=str(offset2))
    wait_until(lambda: len(runs_of(svc.api, "p")) > len(earlier), timeout=15, message="p firing after resume")
    for run in runs_of(svc.api, "p"):
        if run["run_id"] not in earlier:
            assert_fire_run(run, "p")
            assert fire_ms_of(run) > resumed_at, "a fire time of the pause ran: %r" % run

    # pause and resume without a note keep the note.
    assert pause(svc.api, "p")["note"] == "thawed"
    assert resume(svc.api, "p")["note"] == "thawed"


def test_trigger_starts_one_run_now_also_while_paused_under_the_overlap_policy(api, webhook):
    release = threading.Event()
    hold_steps(webhook, release)
    api.put_workflow(WF, webhook.url(), timeout_ms=LONG_MS, max_attempts=1)
    put_schedule(api, "t", cron="0 0 1 1 *", overlap="skip", paused=True, input={"manual": True})

    r = action(api, "t", "trigger")
    assert r.status == 200 and set(r.body) == {"run_id", "outcome"}, r
    assert r.body["outcome"] == "started", r
    rid = r.body["run_id"]
    assert rid.startswith("t-trigger-") and ULID_RE.match(rid[len("t-trigger-"):]), rid
    (call,) = webhook.wait_requests(1, path="/steps", run_id=rid, timeout=15)
    assert call.json["payload"] == {"manual": True}
    run = api.run(rid)
    assert run["schedule"]["id"] == "t" and run["status"] == "running", run

    try:
        # The triggered run is active: under overlap skip the next trigger is skipped.
        r2 = action(api, "t", "trigger")
        assert r2.status == 200 and r2.body == {"run_id": None, "outcome": "skipped"}, r2
        assert [x["run_id"] for x in runs_of(api, "t")] == [rid], "a skipped trigger started a run"
        s = schedule(api, "t")
        assert s["skipped"] == 1 and s["paused"] is True and s["missed"] == 0, s
    finally:
        release.set()
    assert api.wait_terminal(rid)["status"] == "succeeded"
    r3 = action(api, "t", "trigger")
    assert r3.status == 200 and r3.body["outcome"] == "started" and r3.body["run_id"] != rid, r3
    assert api.wait_terminal(r3.body["run_id"])["status"] == "succeeded"
    assert len(runs_of(api, "t")) == 2
    assert schedule(api, "t")["paused"] is True


# --------------------------------------------------------------------------
# backfill
# --------------------------------------------------------------------------

def backfill(api, sid, frm, to, **extra):
    return action(api, sid, "backfill", dict({"from": frm, "to": to}, **extra))


def test_backfill_runs_one_run_per_fire_time_in_the_range_with_ids_from_the_fire_times(api, webhook):
    # The workflow is paused: every run started stays pending (active), so
    # each backfilled fire time finds the previous run active.
    api.put_workflow(WF, webhook.url())
    pause_workflow(api)
    put_schedule(api, "bf", cron="30 2 * * *", timezone="Europe/Paris")  # overlap skip

    # [from, to): from is a fire time (included), to is one (excluded); on
    # 2024-03-31 02:30 does not exist in Paris: it fires at 03:00 CEST.
    frm, to = "2024-03-29T01:30:00.000Z", "2024-04-01T00:30:00.000Z"
    expected = cron_fire_times("30 2 * * *", "Europe/Paris", ms(frm) - 1, count=100, until_ms=ms(to))
    assert [iso(t) for t in expected] == ["2024-03-29T01:30:00.000Z", "2024-03-30T01:30:00.000Z",
                                          "2024-03-31T01:00:00.000Z"]
    r = backfill(api, "bf", frm, to)
    assert r.status == 200, r
    assert (r.body["fire_times"], r.body["started"], r.body["skipped"]) == (3, 3, 0), \
        "backfill's default overlap is allow_all: %r" % r
    runs = by_fire_time(runs_of(api, "bf"))
    assert [fire_ms_of(x) for x in runs] == expected, runs
    assert [x["run_id"] for x in runs] == ["bf-20240329T013000Z", "bf-20240330T013000Z", "bf-20240331T010000Z"]
    for run in runs:
        assert_fire_run(run, "bf")
        assert run["status"] == "pending", run

    # A repeated local time fires once, at its first occurrence.
    r = backfill(api, "bf", "2024-10-27T00:00:00.000Z", "2024-10-28T00:00:00.000Z")
    assert r.status == 200 and (r.body["fire_times"], r.body["started"]) == (1, 1), r
    assert run_or_none(api, "bf-20241027T003000Z")["schedule"] == {"id": "bf",
                                                                   "fire_time": "2024-10-27T00:30:00.000Z"}

    # The same range again starts nothing new: the runs are submitted idempotently.
    before = sorted(x["run_id"] for x in runs_of(api, "bf"))
    r = backfill(api, "bf", frm, to)
    assert r.status == 200 and r.body["fire_times"] == 3, r
    assert sorted(x["run_id"] for x in runs_of(api, "bf")) == before

    # With overlap skip, fire times that find a run active start nothing.
    r = backfill(api, "bf", "2024-06-01T00:00:00.000Z", "2024-06-03T00:00:00.000Z", overlap="skip")
    assert r.status == 200 and (r.body["fire_times"], r.body["started"], r.body["skipped"]) == (2, 0, 2), r
    assert sorted(x["run_id"] for x in runs_of(api, "bf")) == before


def test_backfill_of_more_than_1000_fire_times_is_400_and_starts_nothing(api, webhook):
    api.put_workflow(WF, webhook.url())
    pause_workflow(api)
    put_schedule(api, "bm", cron="* * * * *")
    frm = ms("2024-01-01T00:00:00.000Z")
    r = backfill(api, "bm", iso(frm), iso(frm + 1001 * MINUTE_MS))
    assert_error(r, 400, "invalid_argument", "1000")
    assert runs_of(api, "bm") == []

    r = backfill(api, "bm", iso(frm), iso(frm + 1000 * MINUTE_MS))
    assert r.status == 200 and (r.body["fire_times"], r.body["started"]) == (1000, 1000), r
    runs = runs_of(api, "bm")
    assert len(runs) == 1000
    assert_consecutive(sorted(fire_ms_of(x) for x in runs), MINUTE_MS, "backfill of 1000")


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------

def body_of(**fields):
    """A PUT body of workflow WF with `fields`."""
    return dict({"workflow": WF}, **fields)


HOURLY = "0 * * * *"
BAD_BODIES = [
    (body_of(workflow="no-such-workflow", cron=HOURLY), ("workflow",)),
    ({"cron": HOURLY}, ("workflow",)),
    (body_of(cron=HOURLY, every_ms=60000), ("cron", "every_ms")),
    (body_of(), ("cron", "every_ms")),
    (body_of(cron="*/15 25 * * *"), ("cron", "hour", "position 6")),
    (body_of(cron="0 24 * * *"), ("cron: hour field at position 3: 24 is out of range 0-23",)),
    (body_of(cron="* * * *"), ("cron", "5 fields")),
    (body_of(cron="@fortnightly"), ("cron",)),
    (body_of(cron="0 0 30 2 *"), ("cron",)),
    (body_of(cron=HOURLY, timezone="Mars/Base"), ('timezone: unknown zone "Mars/Base"',)),
    (body_of(every_ms=60000, timezone="Europe/Paris"), ("timezone",)),
    (body_of(every_ms=999), ("every_ms",)),
    (body_of(every_ms=31622400001), ("every_ms",)),
    (body_of(every_ms="60000"), ("every_ms",)),
    (body_of(cron=HOURLY, overlap="sometimes"), ("overlap",)),
    (body_of(cron=HOURLY, catchup_window_ms=-1), ("catchup_window_ms",)),
    (body_of(cron=HOURLY, catchup_window_ms=31622400001), ("catchup_window_ms",)),
    (body_of(cron=HOURLY, jitter_ms=86400001), ("jitter_ms",)),
    (body_of(cron=HOURLY, jitter_ms=-1), ("jitter_ms",)),
    (body_of(cron=HOURLY, start_at="yesterday"), ("start_at",)),
    (body_of(cron=HOURLY, start_at="2030-01-02T00:00:00.000Z", end_at="2030-01-01T00:00:00.000Z"), ("end_at",)),
    (body_of(cron=HOURLY, start_at="2030-01-01T00:00:00.000Z", end_at="2030-01-01T00:00:00.000Z"), ("end_at",)),
    (body_of(cron=HOURLY, note="x" * 1025), ("note",)),
    (body_of(cron=HOURLY, note="\u00e9" * 513), ("note",)),  # 513 characters, 1026 bytes
    (body_of(cron=HOURLY, headers={"x-n": 1}), ("headers",)),
    (body_of(cron=HOURLY, priority=-1), ("priority",)),
    (body_of(cron=HOURLY, max_attempts=0), ("max_attempts",)),
    (body_of(cron=HOURLY, paused="yes"), ("paused",)),
    (body_of(cron=HOURLY, colour="red"), ("colour",)),
]
BAD_IDS = ["unknown-workflow", "no-workflow", "cron-and-every-ms", "neither", "cron-hour-25", "cron-hour-24",
           "cron-4-fields", "cron-unknown-macro", "cron-never-fires", "unknown-zone", "zone-with-every-ms",
           "every-ms-999", "every-ms-too-large", "every-ms-string", "overlap-sometimes", "catchup-negative",
           "catchup-too-large", "jitter-too-large", "jitter-negative", "start-at-not-a-time",
           "end-before-start", "end-equals-start", "note-1025-bytes", "note-1026-utf8-bytes",
           "header-not-string", "priority-negative", "max-attempts-0", "paused-not-bool", "unknown-key"]


def _without_next_fire_times(s):
    return {k: v for k, v in s.items() if k != "next_fire_times"}


@pytest.mark.parametrize("body, names", BAD_BODIES, ids=BAD_IDS)
def test_a_bad_schedule_is_400_naming_the_field_and_creates_or_changes_nothing(api, webhook, body, names):
    api.put_workflow(WF, webhook.url())
    put_schedule(api, "keep", cron="0 9 1 1 *", timezone="Europe/Paris", note="as it was")
    before = schedule(api, "keep")

    for sid in ("new-one", "keep"):
        r = api.put("/v1/schedules/" + sid, body)
        assert_error(r, 400, "invalid_argument")
        for name in names:
            assert name in r.error_message, "the message should name %r: %r" % (name, r.error_message)
    assert_error(api.get("/v1/schedules/new-one"), 404, "not_found")
    assert _without_next_fire_times(schedule(api, "keep")) == _without_next_fire_times(before)
    r = api.get("/v1/schedules")
    assert r.status == 200 and [s["id"] for s in r.body["schedules"]] == ["keep"], r


@pytest.mark.parametrize("sid", [">", "a" * 65, "a b", "a.b"], ids=["gt", "65-chars", "space", "dot-not-in-run-ids"])
def test_a_bad_schedule_id_is_400_naming_it(api, webhook, sid):
    api.put_workflow(WF, webhook.url())
    assert_error(api.put("/v1/schedules/" + q(sid), {"workflow": WF, "cron": "0 * * * *"}),
                 400, "invalid_argument", "id")
    r = api.get("/v1/schedules")
    assert r.status == 200 and r.body["schedules"] == [], r
    # 64 characters of the allowed set is fine.
    put_schedule(api, "aZ09_-" * 10 + "xyzw", cron="0 * * * *")


def test_pause_and_backfill_with_bad_input_are_400_and_change_nothing(api, webhook):
    api.put_workflow(WF, webhook.url())
    pause_workflow(api)
    put_schedule(api, "s", cron="0 0 1 1 *", note="kept")
    before = schedule(api, "s")
    assert_error(action(api, "s", "pause", {"note": "x" * 1025}), 400, "invalid_argument", "note")
    assert_error(action(api, "s", "resume", {"note": "x" * 1025}), 400, "invalid_argument", "note")
    assert_error(action(api, "s", "pause", {"colour": "red"}), 400, "invalid_argument", "colour")
    assert_error(backfill(api, "s", "yesterday", "2024-01-01T05:00:00.000Z"), 400, "invalid_argument", "from")
    assert_error(action(api, "s", "backfill", {"from": "2024-01-01T00:00:00.000Z"}), 400, "invalid_argument",
                 "to")
    assert_error(backfill(api, "s", "2024-01-01T00:00:00.000Z", "2024-01-01T05:00:00.000Z", overlap="sometimes"),
                 400, "invalid_argument", "overlap")
    assert _without_next_fire_times(schedule(api, "s")) == _without_next_fire_times(before)
    assert runs_of(api, "s") == []


def test_an_unknown_schedule_is_404_for_every_operation(api, webhook):
    api.put_workflow(WF, webhook.url())
    put_schedule(api, "known", cron="0 0 1 1 *")
    assert schedule(api, "known")["id"] == "known"
    assert_error(api.get("/v1/schedules/nope"), 404, "not_found")
    assert_error(api.delete("/v1/schedules/nope"), 404, "not_found")
    for name, body in (("pause", None), ("resume", None), ("trigger", None),
                       ("backfill", {"from": "2024-01-01T00:00:00.000Z", "to": "2024-01-02T00:00:00.000Z"})):
        assert_error(action(api, "nope", name, body), 404, "not_found")
    assert api.runs(workflow=WF) == []


# --------------------------------------------------------------------------
# Metrics and jitter
# --------------------------------------------------------------------------

def test_schedule_fires_total_counts_the_runs_fired(api, webhook):
    webhook.route("/steps", lambda req: succeed())
    api.put_workflow(WF, webhook.url())
    assert api.metrics()[FIRES] == 0
    put_schedule(api, "m", every_ms=1000, overlap="allow_all")
    wait_until(lambda: metric(api, FIRES) >= 1, timeout=15, message="the first fire counted")
    first = metric(api, FIRES)
    wait_until(lambda: metric(api, FIRES) >= first + 2, timeout=15, message="fires_total increasing")
    s = pause(api, "m")
    wait_until(lambda: metric(api, FIRES) == s["fired"] == len(runs_of(api, "m")), timeout=5,
               message=lambda: "fires_total %s == fired %d == runs %d"
               % (metric(api, FIRES), s["fired"], len(runs_of(api, "m"))))
    assert metric(api, SKIPS) == 0 and metric(api, MISSES) == 0


@pytest.mark.serial  # each fire time is handled within the jitter (500 ms) of its time
def test_jitter_delays_each_run_by_less_than_jitter_ms_after_its_fire_time(api, webhook):
    # The workflow is paused: the runs stay pending, showing when they were
    # due (next_attempt_at).
    api.put_workflow(WF, webhook.url())
    pause_workflow(api)
    put_schedule(api, "j", every_ms=1000, jitter_ms=500, overlap="allow_all")
    wait_until(lambda: len(runs_of(api, "j")) >= 8, timeout=30, message="eight fire times")
    pause(api, "j")
    delays = []
    for run in runs_of(api, "j"):
        assert_fire_run(run, "j")
        fire = fire_ms_of(run)
        start = ms(run["next_attempt_at"])
        created = ms(run["created_at"])
        assert created >= fire - 1, "started before its fire time: %r" % run
        # Due at fire time + a delay in [0, 500), or, when its pass came
        # after that, at once.
        assert fire <= start < fire + 500 or start == created, run
        delays.append(start - fire)
    # A jittered start, not every run due at once: with eight delays drawn
    # from [0, 500) the odds of all under 50 ms are 1e-8.
    assert max(delays) >= 50, delays
