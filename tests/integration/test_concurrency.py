"""A workflow's max_concurrency caps its in-flight step calls across every
instance sharing the database."""
import threading

from harness import Reply


def test_max_concurrency_holds_across_two_instances(services, webhook):
    a = services.start()
    b = services.start()
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def step(req):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        try:
            # Hold the call long enough for every instance to try claiming more.
            threading.Event().wait(0.3)
        finally:
            with lock:
                state["now"] -= 1
        return Reply(200, {"outcome": "succeed", "result": req.run_id})

    webhook.route("/steps", step)
    a.api.put_workflow("capped", webhook.url(), max_concurrency=3, timeout_ms=10000)
    runs = ["cap%02d" % i for i in range(24)]
    for i, rid in enumerate(runs):
        (a if i % 2 else b).api.submit("capped", run_id=rid)
    for rid in runs:
        run = a.api.wait_terminal(rid, timeout=60)
        assert run["status"] == "succeeded", run
    assert state["peak"] <= 3, "more than max_concurrency calls in flight: %d" % state["peak"]
    assert state["peak"] == 3, "the cap was never reached (peak %d): the test proves nothing" % state["peak"]
