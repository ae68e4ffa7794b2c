"""The command line client (issue 18, item 5; README "Command line"), run as a
user runs it: the real binary as a subprocess against a real service, with
only HOOKFLOW_URL and HOOKFLOW_TOKEN in its environment (no database
configuration). Every command, its table for people, --json (the API's JSON
as is), the exit codes, a clear message for every API error (404, 401 with a
wrong or missing token, 400, 409), an unreachable service, and usage errors
that send nothing."""

import json
import os
import re
import subprocess

import pytest

import threading

from harness import Hang, Reply, cont, fail, succeed, wait_until

TOKEN = "cli-test-token-0123456789abcdef"
pytestmark = pytest.mark.service_env(HOOKFLOW_API_TOKENS=TOKEN)


def run_cli(binary, url, *args, token=TOKEN, stdin=None, env=None, timeout=60):
    """Runs `hookflow ARGS...` with only HOOKFLOW_URL (and HOOKFLOW_TOKEN) set:
    no HOOKFLOW_DATABASE_URL, no proxy. Returns the CompletedProcess (text)."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("HOOKFLOW_") and k.lower() not in
         ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    e["HOOKFLOW_URL"] = url
    if token is not None:
        e["HOOKFLOW_TOKEN"] = token
    e.update(env or {})
    return subprocess.run([binary] + list(args), input=stdin, capture_output=True, text=True,
                          env=e, timeout=timeout)


@pytest.fixture
def cli(hookflow_bin, service):
    def call(*args, **kw):
        return run_cli(hookflow_bin, service.base_url, *args, **kw)
    return call


def table(stdout):
    """A table's lines as lists of cells, with the column starts checked: every
    cell of a row starts where its header does (aligned columns)."""
    lines = [l for l in stdout.splitlines() if l.strip()]
    head = lines[0]
    starts = [m.start() for m in re.finditer(r"\S+", head)]
    rows = []
    for line in lines[1:]:
        cells = []
        for i, s in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else len(line)
            assert s == 0 or line[s - 1] == " ", "column %d is not aligned in %r" % (i, line)
            cells.append(line[s:end].strip())
        rows.append(cells)
    return head.split(), rows


def submit_and_wait(api, workflow, run_id, **fields):
    api.submit(workflow, run_id=run_id, **fields)
    return api.wait_terminal(run_id)


# ---- workflows -------------------------------------------------------------

def test_workflows_put_get_list_with_tables_and_json(cli, api, webhook, tmp_path):
    webhook.route("/steps", lambda req: succeed("ok"))
    f = tmp_path / "orders.json"
    f.write_text(json.dumps({"name": "orders", "url": webhook.url("/steps"), "timeout_ms": 4000,
                             "max_attempts": 2, "secret": "whsec_" + "QUJDREVGR0hJSktMTU5PUA=="}))
    r = cli("workflows", "put", str(f))
    assert (r.returncode, r.stdout, r.stderr) == (0, "workflow orders created\n", "")
    r = cli("workflows", "put", str(f))
    assert (r.returncode, r.stdout) == (0, "workflow orders replaced\n")
    # The file on standard input, the name from --name.
    body = {"url": webhook.url("/steps")}
    r = cli("workflows", "put", "-", "--name", "billing", stdin=json.dumps(body))
    assert (r.returncode, r.stdout) == (0, "workflow billing created\n"), r.stderr
    assert api.get("/v1/workflows/billing").body["url"] == webhook.url("/steps")

    r = cli("workflows", "get", "orders")
    assert r.returncode == 0, r.stderr
    fields = dict(re.split(r"\s{2,}", l.strip(), maxsplit=1) for l in r.stdout.splitlines())
    assert fields["name"] == "orders" and fields["url"] == webhook.url("/steps")
    assert fields["timeout_ms"] == "4000" and fields["signed"] == "true"
    assert "secret" not in fields
    r = cli("workflows", "get", "orders", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == api.get("/v1/workflows/orders").body

    r = cli("workflows", "list")
    assert r.returncode == 0, r.stderr
    head, rows = table(r.stdout)
    assert head == ["NAME", "SIGNED", "PAUSED", "TIMEOUT_MS", "MAX_ATTEMPTS", "UPDATED_AT", "URL"]
    assert [(row[0], row[1], row[3], row[4], row[6]) for row in rows] == [
        ("billing", "false", "30000", "3", webhook.url("/steps")),
        ("orders", "true", "4000", "2", webhook.url("/steps"))]
    r = cli("workflows", "list", "--json")
    assert json.loads(r.stdout) == api.get("/v1/workflows").body


def test_workflows_put_refuses_a_bad_file_before_sending(cli, api, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = cli("workflows", "put", str(bad))
    assert r.returncode == 2 and "FILE: not JSON" in r.stderr, r.stderr
    noname = tmp_path / "noname.json"
    noname.write_text('{"url": "http://127.0.0.1:9/x"}')
    r = cli("workflows", "put", str(noname))
    assert r.returncode == 2 and 'has no "name"' in r.stderr and "--name" in r.stderr, r.stderr
    r = cli("workflows", "put", str(noname), "--name", "other", "--name", "again")
    assert r.returncode == 2 and "--name: given twice" in r.stderr
    named = tmp_path / "named.json"
    named.write_text('{"name": "a", "url": "http://127.0.0.1:9/x"}')
    r = cli("workflows", "put", str(named), "--name", "b")
    assert r.returncode == 2 and "--name: b differs from the file's name \"a\"" in r.stderr
    r = cli("workflows", "put", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "FILE: cannot open" in r.stderr
    big = tmp_path / "big.json"
    big.write_text('{"name": "a", "url": "%s"}' % ("x" * (1024 * 1024)))
    r = cli("workflows", "put", str(big))
    assert r.returncode == 2 and "exceeds 1048576 bytes" in r.stderr
    assert api.get("/v1/workflows").body["workflows"] == []


def test_a_validation_error_of_the_api_is_shown_with_its_field(cli, tmp_path):
    f = tmp_path / "wf.json"
    f.write_text('{"name": "w", "url": "http://127.0.0.1:9/x", "timeout_ms": 0}')
    r = cli("workflows", "put", str(f))
    assert r.returncode == 1, r
    assert r.stderr.startswith("hookflow: workflows put: ")
    assert "timeout_ms" in r.stderr and "(HTTP 400, invalid_argument)" in r.stderr, r.stderr


# ---- runs ------------------------------------------------------------------

def test_runs_list_filters_pages_and_prints_a_table(cli, api, webhook):
    webhook.route("/ok", lambda req: succeed({"n": req.field("payload")}))
    webhook.route("/no", lambda req: fail("declined"))
    api.put_workflow("good", webhook.url("/ok"))
    api.put_workflow("bad", webhook.url("/no"))
    for i in range(3):
        submit_and_wait(api, "good", "g%d" % i, input=i)
    submit_and_wait(api, "bad", "b0")

    r = cli("runs", "list")
    assert r.returncode == 0, r.stderr
    head, rows = table(r.stdout)
    assert head == ["RUN_ID", "WORKFLOW", "STATUS", "STEP", "ATTEMPT", "CREATED_AT", "ERROR"]
    assert [row[:3] for row in rows] == [["b0", "bad", "failed"], ["g2", "good", "succeeded"],
                                         ["g1", "good", "succeeded"], ["g0", "good", "succeeded"]]
    assert rows[0][6] == "declined" and rows[1][6] == "-"

    r = cli("runs", "list", "--workflow", "good", "--status", "succeeded,failed", "--json")
    assert r.returncode == 0
    got = json.loads(r.stdout)
    assert got == api.get("/v1/runs", params={"workflow": "good", "status": "succeeded,failed"}).body
    assert [x["run_id"] for x in got["runs"]] == ["g2", "g1", "g0"]
    r = cli("runs", "list", "--status", "failed", "--json")
    assert [x["run_id"] for x in json.loads(r.stdout)["runs"]] == ["b0"]

    # One page at a time: the next cursor is named on stderr.
    r = cli("runs", "list", "--workflow", "good", "--limit", "2")
    assert r.returncode == 0
    assert [row[0] for row in table(r.stdout)[1]] == ["g2", "g1"]
    m = re.match(r"^more: add --cursor (\S+) for the next page, or --all\n$", r.stderr)
    assert m, r.stderr
    r = cli("runs", "list", "--workflow", "good", "--limit", "2", "--cursor", m.group(1), "--json")
    page = json.loads(r.stdout)
    assert [x["run_id"] for x in page["runs"]] == ["g0"] and page["next_cursor"] is None
    # --all follows every cursor; with --json, one object of the same shape.
    r = cli("runs", "list", "--limit", "1", "--all", "--json")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    every = json.loads(r.stdout)
    assert [x["run_id"] for x in every["runs"]] == ["b0", "g2", "g1", "g0"]
    assert every["next_cursor"] is None

    r = cli("runs", "list", "--workflow", "nothing-here")
    assert (r.returncode, r.stdout.splitlines()[-1]) == (0, "(no runs)")


def test_runs_get_steps_and_json_are_the_apis(cli, api, webhook):
    def steps(req):
        if req.step == 0 and req.attempt == 1:
            return Reply(503, body=b"busy")
        if req.step == 0:
            return cont({"next": 1})
        return succeed({"done": True})
    webhook.route("/s", steps)
    api.put_workflow("w", webhook.url("/s"), max_attempts=3)
    submit_and_wait(api, "w", "r1", input={"a": 1})

    r = cli("runs", "get", "r1")
    assert r.returncode == 0, r.stderr
    fields = dict(re.split(r"\s{2,}", l.strip(), maxsplit=1) for l in r.stdout.splitlines())
    assert fields["run_id"] == "r1" and fields["status"] == "succeeded"
    assert json.loads(fields["result"]) == {"done": True} and fields["error"] == "-"
    r = cli("runs", "get", "r1", "--json")
    assert json.loads(r.stdout) == api.run("r1")

    r = cli("runs", "steps", "r1")
    assert r.returncode == 0, r.stderr
    head, rows = table(r.stdout)
    assert head == ["GEN", "STEP", "ATTEMPT", "RESULT", "HTTP", "DURATION_MS", "STARTED_AT",
                    "FINISHED_AT", "ERROR"]
    assert [(x[1], x[2], x[3], x[4]) for x in rows] == [
        ("0", "1", "transient_error", "503"), ("0", "2", "continue", "200"), ("1", "1", "succeed", "200")]
    assert rows[0][8] == "HTTP 503: busy"
    r = cli("runs", "steps", "r1", "--json")
    assert json.loads(r.stdout) == api.get("/v1/runs/r1/steps").body


def test_runs_get_wait_exits_by_the_runs_end(cli, api, webhook):
    webhook.route("/ok", lambda req: succeed("fine"))
    webhook.route("/no", lambda req: fail("card declined"))
    webhook.route("/wait", lambda req: cont(None, wait_for_signal={"correlation_key": "k-" + req.run_id,
                                                                   "timeout_ms": 600000})
                  if req.step == 0 else succeed("signalled"))
    for name in ("ok", "no", "wait"):
        api.put_workflow(name, webhook.url("/" + name))

    api.submit("ok", run_id="s1")
    r = cli("runs", "get", "s1", "--wait")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^status\s+succeeded$", r.stdout, re.M)

    api.submit("no", run_id="f1")
    r = cli("runs", "get", "f1", "--wait", "--json")
    assert r.returncode == 6 and json.loads(r.stdout)["error"] == "card declined"

    api.submit("wait", run_id="w1")
    api.wait_status("w1", "waiting")
    r = cli("runs", "get", "w1", "--wait", "--timeout-ms", "300")
    assert r.returncode == 8, r
    assert "run w1 is still waiting after 300 ms" in r.stderr
    assert re.search(r"^status\s+waiting$", r.stdout, re.M)

    r = cli("runs", "cancel", "w1")
    assert (r.returncode, r.stdout) == (0, "run w1 cancelled\n"), r.stderr
    r = cli("runs", "get", "w1", "--wait")
    assert r.returncode == 7 and re.search(r"^status\s+cancelled$", r.stdout, re.M)


def test_runs_get_wait_returns_when_a_signal_ends_the_run(hookflow_bin, service, api, webhook):
    webhook.route("/wait", lambda req: cont(None, wait_for_signal={"correlation_key": "key-" + req.run_id,
                                                                   "timeout_ms": 600000})
                  if req.step == 0 else succeed(req.field("signal")))
    api.put_workflow("wait", webhook.url("/wait"))
    api.submit("wait", run_id="w2")
    api.wait_status("w2", "waiting")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKFLOW_")
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update(HOOKFLOW_URL=service.base_url, HOOKFLOW_TOKEN=TOKEN)
    waiter = subprocess.Popen([hookflow_bin, "runs", "get", "w2", "--wait", "--json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        r = run_cli(hookflow_bin, service.base_url, "signal", "key-w2", '{"approved": true}')
        assert (r.returncode, r.stdout) == (0, "signal key-w2: delivered to the run waiting on it\n")
        out, err = waiter.communicate(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    run = json.loads(out)
    assert run["status"] == "succeeded"
    assert run["result"] == {"status": "delivered", "payload": {"approved": True}}

    r = run_cli(hookflow_bin, service.base_url, "signal", "nobody-waits", "[1, 2]", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == {"outcome": "buffered"}
    r = run_cli(hookflow_bin, service.base_url, "signal", "nobody-waits", "3")
    assert r.stdout.startswith("signal nobody-waits: buffered")


def test_cancel_of_a_running_run_and_of_a_terminal_one(cli, api, webhook):
    release = threading.Event()
    webhook.route("/hang", lambda req: Hang(release=release, then=Reply(200, json_body={"outcome": "succeed"})))
    api.put_workflow("hang", webhook.url("/hang"), timeout_ms=60000)
    api.submit("hang", run_id="h1")
    webhook.wait_requests(1, run_id="h1")
    r = cli("runs", "cancel", "h1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] in ("cancelling", "cancelled")
    release.set()
    api.wait_terminal("h1")
    r = cli("runs", "cancel", "h1")
    assert r.returncode == 1 and r.stdout == ""
    assert "(HTTP 409, already_terminal)" in r.stderr and "h1" in r.stderr, r.stderr


def test_rerun_from_a_step_with_and_without_input(cli, api, webhook):
    webhook.route("/s", lambda req: cont({"from": req.step}) if req.step == 0 else succeed(req.field("payload")))
    api.put_workflow("w", webhook.url("/s"))
    submit_and_wait(api, "w", "r1", input={"x": 1})

    r = cli("runs", "rerun", "r1", "--from-step", "1")
    assert r.returncode == 0, r
    assert re.match(r"^run r1: generation 2 starts at step 1 \((pending|running|succeeded)\)\n$", r.stdout), r
    run = api.wait_terminal("r1")
    assert run["generation"] == 2 and run["result"] == {"from": 0}

    r = cli("runs", "rerun", "r1", "--input", '{"x": 2}', "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["generation"] == 3
    assert api.wait_terminal("r1")["input"] == {"x": 2}

    r = cli("runs", "rerun", "r1", "--from-step", "7")
    assert r.returncode == 1 and "(HTTP 400, invalid_argument)" in r.stderr, r.stderr
    r = cli("runs", "rerun", "r1", "--input", "{oops")
    assert r.returncode == 2 and "--input: not JSON" in r.stderr


def test_dead_letters_list_and_redrive(cli, api, webhook):
    state = {"ok": False}
    webhook.route("/s", lambda req: succeed("recovered") if state["ok"] else Reply(400, body=b"bad request"))
    api.put_workflow("w", webhook.url("/s"), max_attempts=1)
    submit_and_wait(api, "w", "d1")
    submit_and_wait(api, "w", "d2")
    wait_until(lambda: len(api.get("/v1/dead-letters").body["dead_letters"]) == 2, timeout=10)

    r = cli("dead-letters", "list", "--workflow", "w", "--kind", "step")
    assert r.returncode == 0, r.stderr
    head, rows = table(r.stdout)
    assert head == ["ID", "KIND", "WORKFLOW", "RUN_ID", "STEP", "ATTEMPTS", "HTTP", "CREATED_AT",
                    "LAST_ERROR"]
    assert sorted((x[1], x[2], x[3], x[4], x[5], x[6], x[8]) for x in rows) == [
        ("step", "w", rid, "0", "1", "400", "HTTP 400: bad request") for rid in ("d1", "d2")]
    r = cli("dead-letters", "list", "--kind", "callback", "--json")
    assert json.loads(r.stdout) == {"dead_letters": [], "next_cursor": None}

    dl = [x for x in api.get("/v1/dead-letters").body["dead_letters"] if x["run_id"] == "d1"][0]
    state["ok"] = True
    r = cli("dead-letters", "redrive", dl["id"])
    assert (r.returncode, r.stdout) == (0, "dead letter %s redriven (its run reruns from the dead step)\n"
                                        % dl["id"]), r.stderr
    assert api.wait_terminal("d1")["status"] == "succeeded"
    r = cli("dead-letters", "redrive", dl["id"])
    assert r.returncode == 4 and "(HTTP 404, not_found)" in r.stderr, r.stderr
    r = cli("dead-letters", "list", "--kind", "parcel")
    assert r.returncode == 2 and "--kind: must be step or callback" in r.stderr


# ---- errors ----------------------------------------------------------------

def test_not_found_exits_4_with_the_apis_message(cli):
    r = cli("runs", "get", "no-such-run")
    assert (r.returncode, r.stdout) == (4, "")
    assert r.stderr.startswith("hookflow: runs get: ") and "(HTTP 404, not_found)" in r.stderr
    r = cli("workflows", "get", "nope", "--json")
    assert (r.returncode, r.stdout) == (4, "")
    r = cli("runs", "steps", "no-such-run")
    assert r.returncode == 4


def test_a_wrong_or_missing_token_exits_5_and_says_so(hookflow_bin, service):
    r = run_cli(hookflow_bin, service.base_url, "runs", "list", token="wrong-token-0123456789")
    assert (r.returncode, r.stdout) == (5, "")
    assert "(HTTP 401, unauthenticated)" in r.stderr
    assert "the service refused HOOKFLOW_TOKEN" in r.stderr, r.stderr
    r = run_cli(hookflow_bin, service.base_url, "workflows", "list", token=None)
    assert r.returncode == 5
    assert "set HOOKFLOW_TOKEN to one of the service's API tokens" in r.stderr, r.stderr


def test_an_unreachable_service_exits_3(hookflow_bin, refused_port):
    url = "http://127.0.0.1:%d" % refused_port.port
    r = run_cli(hookflow_bin, url, "runs", "list")
    assert (r.returncode, r.stdout) == (3, "")
    assert r.stderr.startswith("hookflow: runs list: cannot reach hookflow at %s: " % url), r.stderr
    assert "HOOKFLOW_URL" in r.stderr


def test_something_that_is_not_hookflow_is_named(hookflow_bin, webhook):
    webhook.route("/v1/runs", lambda req: Reply(502, body=b"<html>Bad Gateway</html>"))
    webhook.route("/v1/workflows", lambda req: Reply(200, body=b"<html>hello</html>"))
    r = run_cli(hookflow_bin, webhook.url(""), "runs", "list")
    assert r.returncode == 1
    assert "HTTP 502 from %s, not an answer of hookflow: <html>Bad Gateway</html>" % webhook.url("") \
        in r.stderr, r.stderr
    r = run_cli(hookflow_bin, webhook.url(""), "workflows", "list")
    assert r.returncode == 1 and "is not a JSON object" in r.stderr, r.stderr


def test_usage_errors_name_the_argument_and_send_nothing(hookflow_bin, webhook):
    # Pointed at a recording server: a usage error must not call it.
    url = webhook.url("")
    cases = [
        (["runs", "list", "--limit", "0"], "--limit: must be an integer from 1 to 1000"),
        (["runs", "list", "--limit"], "--limit: needs a value"),
        (["runs", "list", "--status", "done"], '--status: "done" is not a run status'),
        (["runs", "list", "--created-after", "yesterday"], "--created-after: must be an RFC 3339 time"),
        (["runs", "list", "--workflow", "bad name"], "--workflow"),
        (["runs", "list", "--all", "--cursor", "abc"], "--all: starts from the first page"),
        (["runs", "list", "--bogus"], "unknown option --bogus"),
        (["runs", "get"], "missing argument: it takes RUN_ID"),
        (["runs", "get", "bad id!"], "RUN_ID: must contain only [A-Za-z0-9_-]"),
        (["runs", "get", "x", "--timeout-ms", "5"], "--timeout-ms: only with --wait"),
        (["runs", "get", "x", "y"], "unexpected argument y"),
        (["runs", "rerun", "x", "--from-step", "-1"], "--from-step: must be an integer from 0"),
        (["runs", "launch"], "hookflow: runs: launch: unknown command; one of runs list, runs get, runs steps"),
        (["dead-letters"], "one of dead-letters list, dead-letters redrive\n"),
        (["signal", "k", "{nope"], "JSON: not JSON"),
        (["signal", "", "1"], "KEY: must not be empty"),
        (["dead-letters", "redrive", "../x"], "ID: must contain only"),
    ]
    for args, message in cases:
        r = run_cli(hookflow_bin, url, *args)
        assert r.returncode == 2, (args, r)
        assert r.stdout == "", (args, r.stdout)
        assert message in r.stderr, (args, r.stderr)
        assert "hookflow help" in r.stderr
    r = run_cli(hookflow_bin, "ftp://127.0.0.1:1", "runs", "list")
    assert r.returncode == 2 and "HOOKFLOW_URL: must start with http:// or https://" in r.stderr
    r = run_cli(hookflow_bin, url, "runs", "list", token="has space")
    assert r.returncode == 2 and "HOOKFLOW_TOKEN: must be at most 512 bytes of visible ASCII" in r.stderr
    assert webhook.requests() == []


def test_help_lists_every_command_and_the_exit_codes(hookflow_bin):
    r = subprocess.run([hookflow_bin, "help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stderr == ""
    for cmd in ("serve", "migrate", "rotate-keys", "version", "runs list", "runs get RUN_ID [--wait",
                "runs steps", "runs cancel", "runs rerun RUN_ID [--from-step N]", "signal KEY JSON",
                "workflows list", "workflows get NAME", "workflows put FILE", "dead-letters list",
                "dead-letters redrive ID", "check-webhook URL", "Exit codes:"):
        assert cmd in r.stdout, cmd
    r = subprocess.run([hookflow_bin, "frobnicate"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "usage: hookflow COMMAND" in r.stderr


def test_cells_cannot_drive_the_terminal(cli, api, webhook):
    webhook.route("/s", lambda req: fail("\x1b[31mred\x1b[0m\nsecond line\x07"))
    api.put_workflow("w", webhook.url("/s"))
    submit_and_wait(api, "w", "esc")
    r = cli("runs", "list")
    assert r.returncode == 0
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "?[31mred?[0m second line?" in r.stdout, r.stdout
    r = cli("runs", "get", "esc")
    assert "\x1b" not in r.stdout and "?[31mred?[0m second line?" in r.stdout
    # --json is the API's JSON as is (escaped by JSON itself).
    r = cli("runs", "get", "esc", "--json")
    assert json.loads(r.stdout)["error"] == "\x1b[31mred\x1b[0m\nsecond line\x07"
