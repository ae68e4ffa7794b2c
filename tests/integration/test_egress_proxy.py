"""Issue 12, item 1: egress cannot be detoured.

libcurl must never take a proxy from the environment (http_proxy, ALL_PROXY, ...):
with one there, a call to an address HOOKFLOW_URL_DENY refuses went out through the
proxy, and the connect-time check only saw the proxy's address. An egress proxy is
an explicit setting, HOOKFLOW_EGRESS_PROXY; hookflow then resolves the webhook's host
itself, checks the addresses against the policy and makes the proxy CONNECT to the
checked address (an IP literal), never to the name. NAT64, 6to4 and the Azure
WireServer address are refused like link-local and metadata addresses.

The proxy here is real: a threaded HTTP proxy on loopback that records every request
and forwards it (absolute-URI requests and CONNECT tunnels)."""
import http.client
import http.server
import select
import socket
import threading
import urllib.parse

import pytest

from harness import StepScript, assert_error, succeed

WORKFLOW = dict(max_attempts=1, timeout_ms=10000)


class Proxy:
    """An HTTP forward proxy on `host` (127.0.0.2 by default: a loopback address
    other than the webhooks' 127.0.0.1, so a deny list can cover the webhook
    without covering the proxy). Records (method, target, headers) of every
    request before forwarding it."""

    def __init__(self, host="127.0.0.2"):
        self._lock = threading.Lock()
        self._seen = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def do_CONNECT(self):
                proxy._record(self)
                host, _, port = self.path.rpartition(":")
                try:
                    upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
                except OSError:
                    self.send_error(502, "cannot reach %s" % self.path)
                    return
                self.send_response(200, "Connection established")
                self.end_headers()
                self._relay(upstream)

            def _relay(self, upstream):
                socks = [self.connection, upstream]
                try:
                    while True:
                        readable, _, _ = select.select(socks, [], [], 30)
                        if not readable:
                            return
                        for s in readable:
                            data = s.recv(65536)
                            if not data:
                                return
                            (upstream if s is self.connection else self.connection).sendall(data)
                finally:
                    upstream.close()
                    self.close_connection = True

            def _forward(self):
                proxy._record(self)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                url = urllib.parse.urlsplit(self.path)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("proxy-connection", "connection")}
                try:
                    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=10)
                    conn.request(self.command, url.path + ("?" + url.query if url.query else ""),
                                 body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                except OSError:
                    self.send_error(502, "cannot reach %s" % self.path)
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            do_GET = do_POST = do_PUT = _forward

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://%s:%d" % (host, self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _record(self, handler):
        with self._lock:
            self._seen.append((handler.command, handler.path,
                               {k.lower(): v for k, v in handler.headers.items()}))

    def requests(self):
        with self._lock:
            return list(self._seen)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy():
    p = Proxy()
    yield p
    p.close()


def _env_proxies(proxy, names):
    env = {name: proxy.url for name in names}
    env["no_proxy"] = ""
    return env


ALL_PROXY_VARS = ("http_proxy", "https_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy")


@pytest.mark.parametrize("names", [("http_proxy",), ("ALL_PROXY",), ("all_proxy",), ALL_PROXY_VARS],
                         ids=["http_proxy", "ALL_PROXY", "all_proxy", "all"])
def test_a_proxy_in_the_environment_does_not_carry_a_call_the_deny_list_refuses(
        services, webhook, proxy, names):
    # The webhook is reached by name (a literal would be refused at
    # registration already); the deny list covers every address the name has,
    # not the proxy's 127.0.0.2.
    svc = services.start(HOOKFLOW_URL_DENY="127.0.0.1/32,::1/128", **_env_proxies(proxy, names))
    webhook.route("/steps", StepScript({0: succeed("never")}))
    svc.api.put_workflow("deny", webhook.url().replace("127.0.0.1", "localhost"), **WORKFLOW)
    svc.api.submit("deny", run_id="denied")
    end = svc.api.wait_terminal("denied", timeout=30)
    assert end["status"] == "failed", end
    assert end["error_kind"] == "permanent", end
    assert "refused" in end["error"] and "HOOKFLOW_URL_DENY" in end["error"], end
    assert proxy.requests() == [], "the call went through the environment's proxy"
    assert webhook.requests(path="/steps") == [], "the webhook was called"


def test_a_proxy_in_the_environment_is_not_used_for_steps_or_callbacks(services, webhook, proxy):
    svc = services.start(**_env_proxies(proxy, ALL_PROXY_VARS))
    webhook.route("/steps", StepScript({0: succeed("direct")}))
    webhook.route("/done", lambda req: None)
    host_url = webhook.url().replace("127.0.0.1", "localhost")
    svc.api.put_workflow("direct", host_url, callback_url=host_url.replace("/steps", "/done"),
                         **WORKFLOW)
    svc.api.submit("direct", run_id="direct")
    end = svc.api.wait_terminal("direct", timeout=30)
    assert end["status"] == "succeeded", end
    webhook.wait_requests(1, path="/done", timeout=30)
    assert len(webhook.requests(path="/steps")) == 1
    assert proxy.requests() == [], "a call went through the environment's proxy"


def test_an_egress_proxy_is_asked_to_connect_to_the_checked_address_not_the_name(
        services, webhook, proxy):
    # HOOKFLOW_EGRESS_PROXY carries steps and callbacks; no_proxy from the
    # environment is ignored too. The name "localhost" is resolved by hookflow
    # and the proxy gets CONNECT <address>:<port>: the denied ::1 is skipped,
    # 127.0.0.1 is pinned. The proxy's own address (127.0.0.2) is the
    # operator's: the deny list covers webhook targets, not the proxy. The runs
    # start together, so their calls wait for the same lookup.
    svc = services.start(HOOKFLOW_EGRESS_PROXY=proxy.url, no_proxy="*", NO_PROXY="*",
                         HOOKFLOW_URL_DENY="::1/128,127.0.0.2/32")
    assert "egress=%s" % proxy.url in svc.log_text(), "the start-up line names the proxy"
    webhook.route("/steps", StepScript({0: succeed("via proxy")}))
    webhook.route("/done", lambda req: None)
    host_url = webhook.url().replace("127.0.0.1", "localhost")
    svc.api.put_workflow("proxied", host_url, callback_url=host_url.replace("/steps", "/done"),
                         **WORKFLOW)
    runs = ["proxied-%d" % i for i in range(20)]
    for rid in runs:
        svc.api.submit("proxied", run_id=rid)
    for rid in runs:
        end = svc.api.wait_terminal(rid, timeout=30)
        assert end["status"] == "succeeded", end
    done = webhook.wait_requests(len(runs), path="/done", timeout=30)
    steps = webhook.requests(path="/steps")
    assert len(steps) == len(runs)
    for req in steps + done:
        assert req.headers["host"] == "localhost:%d" % webhook.port, req.headers
    seen = proxy.requests()
    assert seen, "the calls did not go through HOOKFLOW_EGRESS_PROXY"
    target = "127.0.0.1:%d" % webhook.port
    assert [(m, t) for m, t, _ in seen] == [("CONNECT", target)] * len(seen), seen


def test_an_egress_proxy_does_not_carry_a_call_the_policy_refuses(services, webhook, proxy):
    svc = services.start(HOOKFLOW_EGRESS_PROXY=proxy.url, no_proxy="*",
                         HOOKFLOW_URL_DENY="127.0.0.1/32,::1/128")
    webhook.route("/steps", StepScript({0: succeed("never")}))
    svc.api.put_workflow("deny", webhook.url().replace("127.0.0.1", "localhost"), **WORKFLOW)
    svc.api.submit("deny", run_id="denied")
    end = svc.api.wait_terminal("denied", timeout=30)
    assert end["status"] == "failed" and end["error_kind"] == "permanent", end
    assert "refused" in end["error"] and "HOOKFLOW_URL_DENY" in end["error"], end
    assert proxy.requests() == [], "a refused call reached the proxy"
    assert webhook.requests(path="/steps") == []


def test_an_egress_proxy_call_to_a_name_that_does_not_resolve_is_a_transient_error(
        services, proxy):
    # .invalid never resolves (RFC 6761). The call fails before the proxy is
    # asked anything; with one attempt the run fails with curl's wording.
    svc = services.start(HOOKFLOW_EGRESS_PROXY=proxy.url)
    svc.api.put_workflow("nxdomain", "http://no-such-host.invalid/steps",
                         max_attempts=1, timeout_ms=30000)
    svc.api.submit("nxdomain", run_id="nxdomain")
    end = svc.api.wait_terminal("nxdomain", timeout=60)
    assert end["status"] == "failed", end
    assert "connection failed: Could not resolve host: no-such-host.invalid" in end["error"], end
    assert proxy.requests() == []


@pytest.mark.parametrize("value", [
    "socks5://127.0.0.1:1080",         # only http and https proxies
    "http://127.0.0.1",                # the port is required
    "http://user:pw@127.0.0.1:3128",   # no credentials in the URL
    "127.0.0.1:3128",                  # no scheme
    "http://127.0.0.1:3128/path",      # no path
])
def test_a_bad_egress_proxy_stops_start_up_naming_the_variable(services, value):
    svc = services.new(HOOKFLOW_EGRESS_PROXY=value)
    svc.start(wait_ready=False)
    code = svc.wait_exit(15)
    assert code is not None and code != 0, "hookflow started with HOOKFLOW_EGRESS_PROXY=%s" % value
    assert "HOOKFLOW_EGRESS_PROXY" in svc.log_text()


def test_nat64_6to4_mapped_and_wireserver_addresses_are_refused_at_registration(api):
    for url in ("http://[64:ff9b::a9fe:a9fe]/steps",      # NAT64 of 169.254.169.254
                "http://[64:ff9b::6464:64c8]/steps",      # NAT64 of 100.100.100.200
                "http://[2002:a9fe:a9fe::1]/steps",       # 6to4 of 169.254.169.254
                "http://[::ffff:169.254.169.254]/steps",  # IPv4-mapped
                "http://168.63.129.16/steps"):            # Azure WireServer
        assert_error(api.put("/v1/workflows/tunnel", {"url": url}), 400, "invalid_argument", "url")


@pytest.mark.service_env(HOOKFLOW_URL_DENY="10.0.0.0/8")
def test_an_address_embedding_a_denied_ipv4_address_is_refused_at_registration(api):
    for url in ("http://[64:ff9b::a00:1]/steps", "http://[2002:a00:1::1]/steps"):
        r = api.put("/v1/workflows/embedded", {"url": url})
        assert_error(r, 400, "invalid_argument", "url")
        assert "HOOKFLOW_URL_DENY" in r.body["error"]["message"], r
    # A NAT64 address of an allowed IPv4 address is an ordinary address.
    r = api.put("/v1/workflows/embedded", {"url": "http://[64:ff9b::b00:1]/steps"})
    assert r.status in (200, 201), r
