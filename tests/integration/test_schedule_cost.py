"""Schedules cost nothing between their fire times (issue 16: "1,000 schedules
firing every minute add no measurable load between fire times"): no poll per
schedule, one due index read when the timer says a fire time has come. The
database's committed transactions over a window between two fire times are
counted with 1,000 minute schedules and with none, on the same service."""

import time

from harness import StepScript, succeed, wait_until

WINDOW_S = 4.0


def committed(db):
    return int(db.scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"))


def transactions_in_window(db):
    """Transactions the database committed over WINDOW_S seconds (the
    window is the measurement, not a wait for a condition)."""
    db.scalar("SELECT pg_stat_clear_snapshot()")
    before = committed(db)
    time.sleep(WINDOW_S)
    db.scalar("SELECT pg_stat_clear_snapshot()")
    return committed(db) - before


def offset_to_second(second):
    """A HOOKFLOW_CLOCK_OFFSET_MS that puts the schedules' clock at `second`
    seconds past its next minute."""
    now = time.time()
    return int(((now // 60 + 1) * 60 + second - now) * 1000)


def test_a_thousand_minute_schedules_add_no_transactions_between_fire_times(services, db, webhook):
    # The schedules' clock starts 5 s past a minute: both windows and the
    # creations fit before its next fire time.
    # PostgreSQL counts a session's transactions when it flushes its
    # statistics, which an idle session does up to ten seconds late; so each
    # window starts right after a (re)start, whose sessions are all new, and
    # the two windows see the same start-up work.
    offset = offset_to_second(5)
    svc = services.start(HOOKFLOW_CLOCK_OFFSET_MS=str(offset))
    api = svc.api
    webhook.route("/steps", StepScript({0: succeed("ok")}))
    api.put_workflow("wf", webhook.url())
    # Autovacuum's workers commit in this database too (an analyze of the
    # schedule table right after 1,000 rows went in counted as load): each
    # window starts with nothing left for them to do.
    db.sql("VACUUM ANALYZE")
    svc.restart(HOOKFLOW_CLOCK_OFFSET_MS=str(offset))
    idle = transactions_in_window(db)

    for i in range(1000):
        r = api.put("/v1/schedules/cost-%04d" % i, {"workflow": "wf", "cron": "* * * * *"})
        assert r.status == 201, r
    db.sql("VACUUM ANALYZE")
    svc.restart(HOOKFLOW_CLOCK_OFFSET_MS=str(offset))
    loaded = transactions_in_window(db)
    assert (time.time() * 1000 + offset) % 60000 > 5000 + 2 * WINDOW_S * 1000, \
        "a fire time fell inside the windows"
    # The safety poll may tick once more in one window than in the other: a
    # handful of transactions, not one per schedule.
    assert loaded <= idle + 10, (
        "%d transactions in %.0f s with 1,000 schedules against %d without" % (loaded, WINDOW_S, idle))

    # They are real: moved to 5 s past the next minute, each fires once.
    svc.restart(HOOKFLOW_CLOCK_OFFSET_MS=str(offset + 60000))
    wait_until(lambda: int(db.scalar("SELECT count(*) FROM run WHERE schedule_id LIKE 'cost-%'")) == 1000,
               timeout=60, interval=0.5, message="a run of every schedule at the next minute")
