"""Self-checks of the harness (no service binary needed): the throwaway
PostgreSQL, the webhook server's recording, hang/disconnect detection, close
without answer, refused ports, and signature helpers."""

import http.client
import json
import os
import signal
import socket
import threading
import time

import pytest

from harness import (Close, Hang, Reply, Service, WaitTimeout, new_secret, sign, succeed,
                     verify_signature, wait_until)


def test_database_is_fresh_and_queryable(db):
    assert db.sql("SELECT 1, 'a b', NULL") == [["1", "a b", ""]]
    assert db.table_exists("run") is False
    db.sql("CREATE TABLE t (x int)")
    assert db.table_exists("t")


def test_postgres_restart_keeps_data(pg, db):
    db.sql("CREATE TABLE t (x int); INSERT INTO t VALUES (7)")
    pg.restart()
    assert db.scalar("SELECT x FROM t") == "7"


def _post(port, path, body=b"{}", conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return c, r.status, dict(r.getheaders()), r.read()


def test_webhook_records_and_answers_with_keep_alive(webhook):
    webhook.route("/steps", lambda req: succeed({"echo": req.json["step"]}))
    c, status, headers, body = _post(webhook.port, "/steps", json.dumps({"run_id": "r", "step": 0}).encode())
    assert status == 200 and json.loads(body) == {"outcome": "succeed", "result": {"echo": 0}}
    _, status, _, body = _post(webhook.port, "/steps", json.dumps({"run_id": "r", "step": 1}).encode(), conn=c)
    assert json.loads(body)["result"] == {"echo": 1}
    reqs = webhook.wait_requests(2, run_id="r")
    assert [r.step for r in reqs] == [0, 1]
    assert reqs[0].headers["content-type"] == "application/json"
    _, status, _, _ = _post(webhook.port, "/unrouted")
    assert status == 404


def test_webhook_hang_reports_client_disconnect(webhook):
    webhook.route("/steps", lambda req: Hang(max_s=10))
    c = http.client.HTTPConnection("127.0.0.1", webhook.port, timeout=10)
    c.request("POST", "/steps", body=b'{"run_id":"h"}')
    (req,) = webhook.wait_requests(1, run_id="h")
    t0 = time.monotonic()
    c.sock.close()
    assert req.disconnected.wait(2)
    assert req.disconnected_at - t0 < 0.5


def test_webhook_hang_can_be_released(webhook):
    release = threading.Event()
    webhook.route("/steps", lambda req: Hang(release=release, then=Reply(202, body=b"late")))
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", _post(webhook.port, "/steps")))
    t.start()
    webhook.wait_requests(1)
    release.set()
    t.join(5)
    assert out["r"][1] == 202 and out["r"][3] == b"late"


def test_webhook_close_without_answer(webhook):
    webhook.route("/steps", lambda req: Close())
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _post(webhook.port, "/steps")


def test_refused_port_refuses(refused_port):
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", refused_port.port), timeout=2)


def test_signature_helpers_match_standard_webhooks_example():
    # Example from the Standard Webhooks specification.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    sig = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
    assert sig == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    headers = {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
               "webhook-signature": "v1,bogus " + sig}
    assert verify_signature(secret, headers, body)
    assert not verify_signature(new_secret(), headers, body)


def test_wait_until_returns_value_or_raises():
    assert wait_until(lambda: 5, timeout=1) == 5
    with pytest.raises(WaitTimeout):
        wait_until(lambda: None, timeout=0.1, message="never")


def test_service_wrapper_start_stop_kill_restart(db, tmp_path):
    fake = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_service.py")
    svc = Service(fake, db, str(tmp_path / "fake.log"), {"HOOKFLOW_LOG_LEVEL": "warn"})
    svc.start(timeout=10)
    assert svc.api.get("/healthz").text == "warn"
    assert svc.stop(signal.SIGTERM) == 0
    assert "SIGTERM" in svc.log_text() and db.url in svc.log_text()
    svc.restart(HOOKFLOW_LOG_LEVEL="error")
    assert svc.api.get("/healthz").text == "error"
    assert svc.kill() == -signal.SIGKILL
    assert not svc.running()
    assert svc.log_text().count("listening") == 2
