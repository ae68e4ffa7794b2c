"""Issue 6: hostile webhook URLs and answers, and secrets that never leak.
Webhook addresses are checked after DNS resolution; answers are capped in size
and time; signing secrets and API tokens appear in no answer, log or metric."""
import socket
import threading

import pytest

from harness import Reply, StepScript, assert_error, new_secret, succeed


def test_metadata_and_link_local_urls_are_refused_at_registration(api):
    for url in ("http://169.254.169.254/latest/meta-data", "http://[fe80::1]/x",
                "http://100.100.100.200/"):
        r = api.put("/v1/workflows/meta", {"url": url})
        assert_error(r, 400, "invalid_argument", "url")
    r = api.post("/v1/runs", {"workflow": "nope", "callback_url": "http://169.254.169.254/"})
    assert_error(r, 400, "invalid_argument", "callback_url")


@pytest.mark.service_env(HOOKFLOW_URL_DENY="127.0.0.0/8,::1/128")
def test_a_name_resolving_to_a_denied_address_is_refused_after_dns(api, webhook):
    # "localhost" passes registration (a name); its address is checked when
    # the call connects, and the deny list refuses it: a permanent error,
    # the webhook never sees the request.
    url = webhook.url().replace("127.0.0.1", "localhost")
    webhook.route("/steps", StepScript({0: succeed("never")}))
    api.put_workflow("deny", url, max_attempts=3)
    run = api.submit("deny", run_id="denied")
    end = api.wait_terminal("denied", timeout=20)
    assert end["status"] == "failed", end
    assert end["error_kind"] == "permanent", end
    assert "refused" in end["error"] and "HOOKFLOW_URL_DENY" in end["error"], end
    assert webhook.requests(path="/steps") == [], "the webhook was called"
    assert run["run_id"] == "denied"


@pytest.mark.service_env(HOOKFLOW_URL_ALLOW="10.0.0.0/8")
def test_an_allow_list_refuses_every_other_address(api, webhook):
    webhook.route("/steps", StepScript({0: succeed("never")}))
    # A literal address is refused at registration already...
    assert_error(api.put("/v1/workflows/allow", {"url": webhook.url()}), 400, "invalid_argument", "url")
    # ...a name only when its addresses are known, at call time.
    api.put_workflow("allow", webhook.url().replace("127.0.0.1", "localhost"), max_attempts=2)
    api.submit("allow", run_id="not-allowed")
    end = api.wait_terminal("not-allowed", timeout=20)
    assert end["status"] == "failed" and "HOOKFLOW_URL_ALLOW" in end["error"], end
    assert webhook.requests(path="/steps") == []


class RawServer:
    """A loopback server answering every connection with `respond(conn)`."""

    def __init__(self, respond):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.respond = respond
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        try:
            conn.settimeout(30)
            conn.recv(65536)
            self.respond(conn, self.stop)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.sock.close()


def _stream_forever(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"400\r\n" + b" " * 1024 + b"\r\n"
    while not stop.is_set():
        conn.sendall(chunk)


def _huge_header(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (200 * 1024) + b"\r\n"
                 b"Content-Length: 2\r\n\r\n{}")


@pytest.mark.service_env(HOOKFLOW_MAX_RESPONSE_BYTES="65536")
def test_a_webhook_streaming_forever_is_cut_off_at_the_size_cap(api):
    srv = RawServer(_stream_forever)
    try:
        api.put_workflow("stream", "http://127.0.0.1:%d/steps" % srv.port, timeout_ms=20000)
        api.submit("stream", run_id="streamer")
        end = api.wait_terminal("streamer", timeout=30)
        assert end["status"] == "failed" and end["error_kind"] == "permanent", end
        assert "exceeds 65536 bytes" in end["error"], end
    finally:
        srv.close()


def test_a_webhook_sending_a_huge_header_is_cut_off(api):
    srv = RawServer(_huge_header)
    try:
        api.put_workflow("bighead", "http://127.0.0.1:%d/steps" % srv.port, max_attempts=2,
                         retry_backoff={"base_ms": 10, "max_ms": 10})
        api.submit("bighead", run_id="bighead")
        end = api.wait_terminal("bighead", timeout=30)
        assert end["status"] == "failed", end
        assert "headers" in end["error"], end
    finally:
        srv.close()


def test_a_slow_stream_is_cut_off_at_the_deadline(api):
    def slow(conn, stop):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        while not stop.wait(0.2):
            conn.sendall(b" ")

    srv = RawServer(slow)
    try:
        api.put_workflow("slow", "http://127.0.0.1:%d/steps" % srv.port, timeout_ms=800,
                         max_attempts=1)
        api.submit("slow", run_id="slowpoke")
        end = api.wait_terminal("slowpoke", timeout=30)
        assert end["status"] == "failed" and "timed out after 800 ms" in end["error"], end
    finally:
        srv.close()


TOKEN = "tok-" + "s3cr3t-api-token-value"


@pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)
def test_secrets_and_tokens_never_appear_in_answers_logs_or_metrics(service, api, webhook):
    secret = new_secret()
    webhook.route("/steps", StepScript({0: Reply(503, body="nope"), 1: succeed("x")}))
    body = api.put_workflow("secretive", webhook.url(), secret=secret, max_attempts=1)
    assert body["signed"] is True and "secret" not in body
    assert "secret" not in api.get("/v1/workflows/secretive").body
    listing = api.get("/v1/workflows").text
    api.submit("secretive", run_id="sec-1")
    api.wait_terminal("sec-1", timeout=20)
    texts = [listing, api.get("/metrics").text, api.get("/v1/runs/sec-1").text,
             api.get("/v1/runs/sec-1/steps").text, api.get("/v1/dead-letters").text,
             service.log_text()]
    key = secret.split("_", 1)[1]
    for t in texts:
        assert secret not in t and key not in t, "the signing secret leaked"
        assert TOKEN not in t, "an API token leaked"
