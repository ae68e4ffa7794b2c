// The main scenario, against a service started without API tokens: every
// endpoint through the generated client, every answer checked against the
// spec, every webhook request verified (signature and schema), and every
// documented status provoked (401 and 503 come from auth.test and
// dbdown.test; coverage.test checks that nothing documented was missed).
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, test } from "node:test";
import { loadEnv, makeClient, Recorder, rawBody, streamedBody, TOO_LARGE, type Api } from "./client";
import { Contract } from "./contract";
import { sendSample } from "./samples";
import { HookServer, newSecret, script, type Action, type Script, type StepDelivery } from "./hooks";
import { error, sha256hex, status, TIMESTAMP, until, type Answer } from "./util";

const env = loadEnv();
const contract = new Contract(env.specJson);
const rec = new Recorder(contract, env.obsFile, "main");
const api: Api = makeClient(env, rec);
const hook = new HookServer(contract, newSecret());

const WF = "ct-main"; // steps on the scripted webhook, callbacks acknowledged
const WF_CB = "ct-cbdead"; // callbacks refused once (dead letter, then redrive)
const WF_BULK = "ct-bulk";
const LONG = 600000; // a delay or wait that never ends within the test
const NOT_FOUND_RUN = "ct-no-such-run";
const BAD_ID = "bad!id"; // '!' is outside [A-Za-z0-9_-]
const LONG_KEY = "k".repeat(513); // over the 512-byte limit of keys

// ---- helpers -------------------------------------------------------------

async function submit(runId: string, input: Script, extra: Record<string, unknown> = {}, workflow = WF) {
  return status(
    await api.POST("/v1/runs", { body: { workflow, run_id: runId, input, ...extra } }),
    201,
    `submit ${runId}`,
  ).data!;
}

/** Long-polls the run until it is terminal (or fails after the deadline). */
async function finished(runId: string) {
  const t0 = Date.now();
  for (;;) {
    const r = status(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: runId }, query: { wait_ms: 20000 } } }), 200);
    const run = r.data!;
    if (["succeeded", "failed", "cancelled"].includes(run.status)) return run;
    if (Date.now() - t0 > 30000) assert.fail(`run ${runId} did not terminate: ${JSON.stringify(run)}`);
  }
}

async function getRun(runId: string) {
  return status(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: runId } } }), 200).data!;
}

async function runWithStatus(runId: string, want: string) {
  return until(`run ${runId} ${want}`, async () => {
    const run = await getRun(runId);
    return run.status === want ? run : undefined;
  });
}

async function history(runId: string) {
  const h = status(await api.GET("/v1/runs/{run_id}/steps", { params: { path: { run_id: runId } } }), 200).data!;
  assert.equal(h.next_cursor, null, `the whole history of ${runId} in one page`);
  return h.steps;
}

type BadBodyInit = { headers?: Record<string, string>; bodySerializer?: () => unknown; duplex?: "half" };

/**
 * The three ways to get a request body wrong, for an operation taking one:
 * not JSON (415), too large (413, sent streamed), malformed JSON (400).
 */
async function badBodies(what: string, send: (init: BadBodyInit) => Promise<Answer>) {
  error(await send({ headers: { "Content-Type": "text/plain" } }), 415, "unsupported_media_type", `${what} text/plain`);
  error(await send({ bodySerializer: streamedBody(TOO_LARGE), duplex: "half" }), 413, "payload_too_large", `${what} too large`);
  error(await send({ bodySerializer: rawBody('{"oops": ') }), 400, "invalid_argument", `${what} malformed`);
}

const cont = (extra: Omit<Extract<Action, { do: "continue" }>, "do"> = {}): Action => ({ do: "continue", ...extra });
const succeed = (result?: unknown, kv?: any): Action => {
  const a: Action = { do: "succeed" };
  if (result !== undefined) a.result = result;
  if (kv !== undefined) a.kv = kv;
  return a;
};

before(async () => {
  await hook.start();
});

after(async () => {
  await hook.stop();
  // Requests that arrived after the last test (late callbacks) were verified too.
  if (hook.failures.length) throw new Error(`webhook verification failures:\n${hook.failures.join("\n")}`);
});

// ---- operations ------------------------------------------------------------

test("operations: healthz, readyz, metrics, openapi.yaml, dashboard, request ids", async () => {
  const h = status(await api.GET("/healthz", { params: { header: { "X-Request-Id": "ct-req-1" } } }), 200);
  assert.deepEqual(h.data, { status: "ok" });
  assert.equal(h.response.headers.get("x-request-id"), "ct-req-1", "X-Request-Id is echoed");
  const other = status(await api.GET("/healthz", { params: { header: { "X-Request-Id": "not valid!" } } }), 200);
  assert.notEqual(other.response.headers.get("x-request-id"), "not valid!", "an invalid request id is replaced");
  const ready = status(await api.GET("/readyz"), 200).data!;
  assert.equal(ready.status, "ready");
  const c = ready.database!.connections;
  assert.equal(c.total, c.workers + c.submitter + c.listener + c.snapshot + c.api_pool, "the budget adds up");
  assert.equal(ready.database!.api_pool.size, c.api_pool);
  const m = status(await api.GET("/metrics", { parseAs: "text" }), 200);
  assert.match(m.data as string, /^hookflow_up 1$/m);
  const y = status(await api.GET("/openapi.yaml", { parseAs: "text" }), 200);
  assert.ok(y.data === fs.readFileSync(env.specYaml, "utf8"), "the served document is openapi/openapi.yaml (is build/hookflow stale?)");
  const d = status(await api.GET("/", { parseAs: "text" }), 200);
  assert.match(d.data as string, /<html/i);
});

test("without API tokens: whoami is admin; another web origin gets 403 on every operation", async () => {
  assert.deepEqual(status(await api.GET("/v1/whoami"), 200).data, { scope: "admin", token_required: false });
  for (const { method, path } of contract.operations()) {
    const key = `${method} ${path}`;
    const r = await sendSample(api, key, { Origin: "http://evil.example" });
    assert.equal(r.status, 403, `${key} from another origin: ${JSON.stringify(r.body)}`);
    assert.equal((r.body as any).error.code, "forbidden", key);
    assert.match((r.body as any).error.message, /^origin: /, key);
  }
  assert.deepEqual(rec.violations, [], "answers that contradict the spec");
});

test("outside the spec: 404 for an unknown path, 405 for a known path's other method", async () => {
  // Not operations of the document (nothing to type), so plain fetch.
  const nf = await fetch(`${env.baseUrl}/v1/nothing-here`);
  assert.equal(nf.status, 404);
  assert.deepEqual(contract.validateComponent("NotFoundError", await nf.json()), []);
  const na = await fetch(`${env.baseUrl}/v1/runs/x`, { method: "DELETE" });
  assert.equal(na.status, 405);
  const body = (await na.json()) as any;
  assert.deepEqual(Object.keys(body), ["error"]);
  assert.deepEqual(Object.keys(body.error).sort(), ["code", "message"]);
  assert.equal(body.error.code, "method_not_allowed");
  assert.ok(na.headers.get("x-request-id"));
});

test(
  // A body announced over the limit by at most as much again is read and
  // dropped before the 413 is sent, so a client still writing it is not reset.
  "413 for a Content-Length over the limit reaches the client",
  async () => {
    const resets: string[] = [];
    for (let i = 0; i < 15; i++) {
      const key = { params: { path: { key: "app/ct/big" } } };
      error(await api.PUT("/v1/kv/{key}", { ...key, body: { value: 1 }, headers: { "Content-Type": "text/plain" } }), 415, "unsupported_media_type");
      try {
        error(await api.PUT("/v1/kv/{key}", { ...key, body: { value: 1 }, bodySerializer: rawBody(TOO_LARGE) }), 413, "payload_too_large");
      } catch (e) {
        resets.push(`${(e as Error).message}: ${((e as any).cause?.code as string) ?? ""}`);
      }
    }
    if (resets.length > 0)
      throw new Error(`${resets.length} of 15 over-limit requests got no answer (${[...new Set(resets)].join(", ")})`);
  },
);

// ---- workflows -------------------------------------------------------------

test("workflows: create, replace, read, list, delete, invalid bodies", async () => {
  const body = {
    url: hook.url("/step"),
    callback_url: hook.url("/callback/ok"),
    timeout_ms: 10000,
    max_attempts: 3,
    priority: 1000,
    retry_backoff: { base_ms: 20, max_ms: 200 },
    max_concurrency: 0,
    secret: hook.secret,
    step_output_replay: false,
  };
  const created = status(await api.PUT("/v1/workflows/{name}", { params: { path: { name: WF } }, body }), 201).data!;
  assert.equal(created.name, WF);
  assert.equal(created.signed, true);
  assert.ok(!("secret" in created), "the secret is never returned");
  assert.deepEqual(created.retry_backoff, { base_ms: 20, max_ms: 200 });
  const replaced = status(await api.PUT("/v1/workflows/{name}", { params: { path: { name: WF } }, body: { ...body, name: WF } }), 200).data!;
  assert.equal(replaced.created_at, created.created_at);

  const cb = status(
    await api.PUT("/v1/workflows/{name}", {
      params: { path: { name: WF_CB } },
      body: { url: hook.url("/step"), callback_url: hook.url("/callback/flaky"), secret: hook.secret, retry_backoff: { base_ms: 20, max_ms: 200 } },
    }),
    201,
  ).data!;
  assert.equal(cb.timeout_ms, 30000, "defaults are filled in");
  assert.equal(cb.max_attempts, 3);
  assert.equal(cb.priority, 1000);
  assert.equal(cb.max_concurrency, 0);
  assert.equal(cb.step_output_replay, false);
  assert.equal(cb.max_pending_ms, 86400000);
  status(await api.PUT("/v1/workflows/{name}", { params: { path: { name: WF_BULK } }, body: { url: hook.url("/step"), secret: hook.secret } }), 201);

  const put = (b: unknown, name = "ct-bad") => api.PUT("/v1/workflows/{name}", { params: { path: { name } }, body: b as any });
  assert.match(error(await put({ url: hook.url("/step"), colour: "red" }), 400, "invalid_argument"), /colour/);
  assert.match(error(await put({ url: "ftp://example/x" }), 400, "invalid_argument"), /url/);
  assert.match(error(await put({ url: hook.url("/step"), secret: "nope" }), 400, "invalid_argument"), /secret/);
  assert.match(error(await put({}), 400, "invalid_argument"), /url/);
  for (const bad of [999, 31536000001, "60000"])
    assert.match(error(await put({ url: hook.url("/step"), max_pending_ms: bad }), 400, "invalid_argument"), /max_pending_ms/);
  assert.match(error(await put({ url: hook.url("/step") }, BAD_ID), 400, "invalid_argument"), /name/);
  await badBodies("PUT workflow", (init) =>
    api.PUT("/v1/workflows/{name}", { params: { path: { name: "ct-bad" } }, body: { url: hook.url("/step") }, ...init }),
  );

  const got = status(await api.GET("/v1/workflows/{name}", { params: { path: { name: WF } } }), 200).data!;
  assert.equal(got.url, hook.url("/step"));
  assert.equal(got.callback_url, hook.url("/callback/ok"));
  error(await api.GET("/v1/workflows/{name}", { params: { path: { name: "ct-nope" } } }), 404, "not_found");
  error(await api.GET("/v1/workflows/{name}", { params: { path: { name: BAD_ID } } }), 400, "invalid_argument");

  const p1 = status(await api.GET("/v1/workflows", { params: { query: { limit: 1 } } }), 200).data!;
  assert.equal(p1.workflows.length, 1);
  assert.ok(p1.next_cursor, "a first page of one has a next cursor");
  const p2 = status(await api.GET("/v1/workflows", { params: { query: { limit: 1, cursor: p1.next_cursor! } } }), 200).data!;
  assert.equal(p2.workflows.length, 1);
  assert.ok(p2.workflows[0].name > p1.workflows[0].name, "workflows page in name order");
  const all = status(await api.GET("/v1/workflows"), 200).data!;
  assert.equal(all.next_cursor, null);
  assert.deepEqual(all.workflows.map((w) => w.name).sort(), [WF_BULK, WF_CB, WF].sort());
  error(await api.GET("/v1/workflows", { params: { query: { limit: 0 } } }), 400, "invalid_argument");
  error(await api.GET("/v1/workflows", { params: { query: { cursor: "%%%" } } }), 400, "invalid_argument");

  status(await api.PUT("/v1/workflows/{name}", { params: { path: { name: "ct-tmp" } }, body: { url: hook.url("/step") } }), 201);
  status(await api.DELETE("/v1/workflows/{name}", { params: { path: { name: "ct-tmp" } } }), 204);
  error(await api.DELETE("/v1/workflows/{name}", { params: { path: { name: "ct-tmp" } } }), 404, "not_found");
  error(await api.DELETE("/v1/workflows/{name}", { params: { path: { name: BAD_ID } } }), 400, "invalid_argument");
});

test("workflows: the signing secret rotates, is shown once, and PUT without it keeps it", async () => {
  // Its own workflow: the scenario's webhook verifies WF's calls with hook.secret.
  // (The signatures of a rotation are checked in tests/integration/test_secret_rotation.py.)
  const name = "ct-rot";
  const first = newSecret();
  status(await api.PUT("/v1/workflows/{name}", { params: { path: { name } }, body: { url: hook.url("/step"), secret: first } }), 201);
  const rot = (body?: { secret?: string | null; grace_ms?: number }, n = name) =>
    api.POST("/v1/workflows/{name}/secret", { params: { path: { name: n } }, body });

  const r1 = status(await rot({ grace_ms: 60000 }), 200).data!;
  assert.match(r1.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, "a generated secret: base64 of 32 bytes");
  assert.ok(r1.previous_valid_until !== null && TIMESTAMP.test(r1.previous_valid_until));
  assert.equal(r1.workflow.signed, true);
  assert.equal(r1.workflow.previous_secret_valid_until, r1.previous_valid_until);
  const given = newSecret();
  const r2 = status(await rot({ secret: given, grace_ms: 0 }), 200).data!;
  assert.equal(r2.secret, given);
  assert.equal(r2.previous_valid_until, null, "grace_ms 0: the replaced secret stops signing at once");
  const r3 = status(await rot(), 200).data!; // no body: generated, 24 h of grace
  assert.notEqual(r3.secret, r1.secret);
  assert.ok(r3.previous_valid_until !== null);

  // PUT without secret (a read-back workflow) keeps it; null removes it.
  const kept = status(await api.PUT("/v1/workflows/{name}", { params: { path: { name } }, body: { url: hook.url("/step") } }), 200).data!;
  assert.equal(kept.signed, true);
  assert.equal(kept.previous_secret_valid_until, r3.previous_valid_until);
  const read = status(await api.GET("/v1/workflows/{name}", { params: { path: { name } } }), 200);
  for (const s of [first, r1.secret, given, r3.secret])
    assert.ok(!JSON.stringify(read.data).includes(s.slice("whsec_".length)), "no secret is ever returned");
  const off = status(await api.PUT("/v1/workflows/{name}", { params: { path: { name } }, body: { url: hook.url("/step"), secret: null } }), 200).data!;
  assert.equal(off.signed, false);
  assert.equal(off.previous_secret_valid_until, null);

  assert.match(error(await rot({ grace_ms: -1 }), 400, "invalid_argument"), /grace_ms/);
  assert.match(error(await rot({ grace_ms: 2592000001 }), 400, "invalid_argument"), /grace_ms/);
  assert.match(error(await rot({ secret: "nope" }), 400, "invalid_argument"), /secret/);
  assert.match(error(await rot({ secrets: "x" } as any), 400, "invalid_argument"), /secrets/);
  assert.match(error(await rot({}, "ct-nope"), 404, "not_found"), /ct-nope/);
  error(await rot({}, BAD_ID), 400, "invalid_argument");
  await badBodies("POST secret", (init) =>
    api.POST("/v1/workflows/{name}/secret", { params: { path: { name } }, body: {}, ...init }),
  );
  status(await api.DELETE("/v1/workflows/{name}", { params: { path: { name } } }), 204);
});

test("workflows: flow-control settings; submissions skipped by key_mode; GET /v1/endpoints", async () => {
  const name = "ct-flow";
  const wf = status(
    await api.PUT("/v1/workflows/{name}", {
      params: { path: { name } },
      body: { url: hook.url("/step"), key_mode: "skip", rate_limit: { limit: 5, period_ms: 1000 }, endpoint_control: false },
    }),
    201,
  ).data!;
  assert.equal(wf.key_mode, "skip");
  assert.deepEqual(wf.rate_limit, { limit: 5, period_ms: 1000, per_key: false });
  assert.equal(wf.endpoint_control, false);
  assert.equal(wf.debounce_ms, null);
  const deb = status(
    await api.PUT("/v1/workflows/{name}", {
      params: { path: { name: "ct-debounce" } },
      body: { url: hook.url("/step"), key_mode: "debounce", debounce_ms: 60000, debounce_max_ms: 120000 },
    }),
    201,
  ).data!;
  assert.equal(deb.debounce_ms, 60000);
  assert.equal(deb.rate_limit, null);
  const bad = (body: Record<string, unknown>) =>
    api.PUT("/v1/workflows/{name}", { params: { path: { name } }, body: { url: hook.url("/step"), ...body } as any });
  assert.match(error(await bad({ key_mode: "later" }), 400, "invalid_argument"), /key_mode/);
  assert.match(error(await bad({ key_mode: "debounce" }), 400, "invalid_argument"), /debounce_ms/);
  assert.match(error(await bad({ debounce_ms: 5 }), 400, "invalid_argument"), /debounce_ms/);
  assert.match(error(await bad({ rate_limit: { limit: 0, period_ms: 1 } }), 400, "invalid_argument"), /rate_limit.limit/);
  assert.match(error(await bad({ rate_limit: { limit: 1 } }), 400, "invalid_argument"), /rate_limit.period_ms/);

  // A debounced run waits a minute: the key's active run, so a skip workflow's
  // second submission of the key is skipped.
  const first = status(
    await api.POST("/v1/runs", { body: { workflow: "ct-debounce", run_id: "ct-deb-1", concurrency_key: "k", input: 1 } }),
    201,
  ).data!;
  assert.equal(first.skipped, false);
  assert.equal(first.status, "scheduled");
  status(await api.PUT("/v1/workflows/{name}", { params: { path: { name: "ct-deb-skip" } }, body: { url: hook.url("/step"), key_mode: "skip" } }), 201);
  status(await api.POST("/v1/runs", { body: { workflow: "ct-deb-skip", run_id: "ct-skip-1", concurrency_key: "k", delay_ms: 60000 } }), 201);
  const skipped = status(
    await api.POST("/v1/runs", { body: { workflow: "ct-deb-skip", run_id: "ct-skip-2", concurrency_key: "k" } }),
    200,
  ).data!;
  assert.equal(skipped.skipped, true);
  assert.equal(skipped.run_id, "ct-skip-1");

  const eps = status(await api.GET("/v1/endpoints"), 200).data!;
  assert.equal(eps.enabled, true);
  assert.ok(typeof eps.instance === "string" && eps.instance.length > 0);
  assert.ok(Array.isArray(eps.endpoints));
});

test("workflows: key_concurrency, pause and resume (idempotent), PUT leaves paused alone", async () => {
  const name = "ct-pause";
  const created = status(
    await api.PUT("/v1/workflows/{name}", { params: { path: { name } }, body: { url: hook.url("/step"), secret: hook.secret, key_concurrency: 2 } }),
    201,
  ).data!;
  assert.equal(created.key_concurrency, 2);
  assert.equal(created.paused, false, "a new workflow is not paused");
  const pause = (n = name, body?: Record<string, never>) => api.POST("/v1/workflows/{name}/pause", { params: { path: { name: n } }, body });
  const resume = (n = name, body?: Record<string, never>) => api.POST("/v1/workflows/{name}/resume", { params: { path: { name: n } }, body });

  const paused = status(await pause(), 200).data!;
  assert.deepEqual(paused, { ...created, paused: true }, "pause changes nothing else");
  assert.deepEqual(status(await pause(name, {}), 200).data, paused, "pausing again changes nothing");
  const put = status(await api.PUT("/v1/workflows/{name}", { params: { path: { name } }, body: { url: hook.url("/step"), key_concurrency: 3 } }), 200).data!;
  assert.equal(put.paused, true, "a PUT leaves paused alone");
  assert.equal(put.key_concurrency, 3);
  const resumed = status(await resume(), 200).data!;
  assert.equal(resumed.paused, false);
  assert.deepEqual(status(await resume(name, {}), 200).data, resumed, "resuming again changes nothing");
  assert.equal(status(await api.GET("/v1/workflows/{name}", { params: { path: { name } } }), 200).data!.paused, false);

  assert.match(error(await pause("ct-nope"), 404, "not_found"), /ct-nope/);
  assert.match(error(await resume("ct-nope"), 404, "not_found"), /ct-nope/);
  error(await pause(BAD_ID), 400, "invalid_argument");
  error(await resume(BAD_ID), 400, "invalid_argument");
  assert.match(error(await pause(name, { paused: true } as any), 400, "invalid_argument"), /paused/);
  assert.match(error(await resume(name, { reason: "x" } as any), 400, "invalid_argument"), /reason/);
  await badBodies("POST pause", (init) => api.POST("/v1/workflows/{name}/pause", { params: { path: { name } }, body: {}, ...init }));
  await badBodies("POST resume", (init) => api.POST("/v1/workflows/{name}/resume", { params: { path: { name } }, body: {}, ...init }));
  const putBad = (key_concurrency: unknown) =>
    api.PUT("/v1/workflows/{name}", { params: { path: { name } }, body: { url: hook.url("/step"), key_concurrency } as any });
  for (const bad of [-1, 1000001, "2", 1.5])
    assert.match(error(await putBad(bad), 400, "invalid_argument"), /key_concurrency/);
  status(await api.DELETE("/v1/workflows/{name}", { params: { path: { name } } }), 204);
});

// ---- runs --------------------------------------------------------------------

test("runs: submit, duplicate, mismatch, long-poll to success, history, kv effects, callback", async () => {
  const input = script(
    "happy",
    cont({ kv: { put: { "app/ct/happy/a": { n: 1 } } } }),
    cont({ delay_ms: 30 }),
    succeed({ ok: true }, { put: { "app/ct/happy/b": "done" }, delete: ["app/ct/happy/a"] }),
  );
  const run = await submit("ct-happy", input, { headers: { tenant: "acme" }, concurrency_key: "ct-key é" });
  assert.equal(run.newly_submitted, true);
  assert.equal(run.concurrency_key, "ct-key é");
  assert.equal(run.run_id, "ct-happy");
  assert.equal(run.generation, 1);
  assert.deepEqual(run.input, input);
  assert.deepEqual(run.headers, { tenant: "acme" });
  assert.equal(run.priority, 1000, "the workflow's priority");
  assert.equal(run.max_attempts, 3, "the workflow's max_attempts");

  const dup = status(await api.POST("/v1/runs", { body: { workflow: WF, run_id: "ct-happy", input, headers: { tenant: "acme" }, concurrency_key: "other" } }), 200).data!;
  assert.equal(dup.newly_submitted, false);
  assert.equal(dup.concurrency_key, "ct-key é", "a duplicate does not change the key");
  error(await api.POST("/v1/runs", { body: { workflow: WF, run_id: "ct-happy", input: { other: 1 } } }), 409, "input_mismatch");

  const done = await finished("ct-happy");
  assert.equal(done.status, "succeeded");
  assert.deepEqual(done.result, { ok: true });
  assert.equal(done.final_step, 2);
  assert.equal(done.error, null);
  assert.equal(done.error_kind, null);
  assert.match(done.finished_at ?? "", TIMESTAMP);
  assert.equal(done.next_attempt_at, null);
  assert.equal(done.waiting, null);

  const steps = await history("ct-happy");
  assert.deepEqual(steps.map((s) => [s.step, s.attempt, s.result, s.http_status]), [
    [0, 1, "continue", 200],
    [1, 1, "continue", 200],
    [2, 1, "succeed", 200],
  ]);
  assert.deepEqual(steps[0].payload, input);
  assert.deepEqual((steps[1].payload as Script).from, 0, "step 1's payload is what step 0 returned");
  const h1 = status(await api.GET("/v1/runs/{run_id}/steps", { params: { path: { run_id: "ct-happy" }, query: { limit: 2 } } }), 200).data!;
  assert.deepEqual(h1.steps, steps.slice(0, 2));
  assert.ok(h1.next_cursor, "a first page of two of three attempts has a next cursor");
  const h2 = status(await api.GET("/v1/runs/{run_id}/steps", { params: { path: { run_id: "ct-happy" }, query: { limit: 2, cursor: h1.next_cursor! } } }), 200).data!;
  assert.deepEqual(h2.steps, steps.slice(2));
  assert.equal(h2.next_cursor, null);
  error(await api.GET("/v1/runs/{run_id}/steps", { params: { path: { run_id: "ct-happy" }, query: { limit: 1001 } } }), 400, "invalid_argument");
  error(await api.GET("/v1/runs/{run_id}/steps", { params: { path: { run_id: "ct-happy" }, query: { cursor: "nope!" } } }), 400, "invalid_argument");

  const delivered = hook.steps("ct-happy");
  assert.equal(delivered.length, 3);
  for (const d of delivered) {
    assert.deepEqual(d.body.headers, { tenant: "acme" });
    assert.equal(d.body.workflow, WF);
    assert.equal(d.body.max_attempts, 3);
    assert.ok(d.body.memo.url.endsWith("/v1/runs/ct-happy"), d.body.memo.url);
    assert.equal(d.body.signal, undefined);
    assert.equal(d.body.concurrency_key, "ct-key é");
  }
  assert.equal(new Set(delivered.map((d) => d.id)).size, 3, "one webhook-id per step");

  const cb = await hook.callback("ct-happy");
  assert.equal(cb.body.status, "succeeded");
  assert.deepEqual(cb.body.result, { ok: true });
  assert.equal(cb.body.final_step, 2);
  assert.deepEqual(cb.body.headers, { tenant: "acme" });
  assert.equal(cb.body.group, null);
  assert.equal(cb.body.concurrency_key, "ct-key é");

  error(await api.GET("/v1/kv/{key}", { params: { path: { key: "app/ct/happy/a" } } }), 404, "not_found");
  const b = status(await api.GET("/v1/kv/{key}", { params: { path: { key: "app/ct/happy/b" } } }), 200).data!;
  assert.equal(b.value, "done");

  error(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: "ct-happy" } } }), 409, "already_terminal");
});

test("runs: invalid submissions and unknown runs", async () => {
  const post = (b: unknown) => api.POST("/v1/runs", { body: b as any });
  assert.match(error(await post({ workflow: "ct-nope" }), 404, "not_found"), /ct-nope/);
  assert.match(error(await post({ workflow: WF, run_id: "bad id" }), 400, "invalid_argument"), /run_id/);
  assert.match(error(await post({ workflow: WF, headers: { "workflow.x": "1" } }), 400, "invalid_argument"), /headers/);
  assert.match(error(await post({ workflow: WF, kv: { put: { "workflow/x": 1 } } }), 400, "invalid_argument"), /kv/);
  assert.match(error(await post({ workflow: WF, kv: { put: { "app/x": 1 }, delete: ["app/x"] } }), 400, "invalid_argument"), /kv/);
  assert.match(error(await post({ workflow: WF, delay_ms: 5, run_at: "2030-01-01T00:00:00.000Z" }), 400, "invalid_argument"), /run_at/);
  assert.match(error(await post({ workflow: WF, colour: "red" }), 400, "invalid_argument"), /colour/);
  for (const bad of ["", "k".repeat(257), "tab\tkey", 7])
    assert.match(error(await post({ workflow: WF, concurrency_key: bad }), 400, "invalid_argument"), /concurrency_key/);
  assert.match(error(await post({}), 400, "invalid_argument"), /workflow/);
  await badBodies("POST run", (init) => api.POST("/v1/runs", { body: { workflow: WF }, ...init }));

  error(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: NOT_FOUND_RUN } } }), 404, "not_found");
  error(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: BAD_ID } } }), 400, "invalid_argument");
  error(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: "ct-happy" }, query: { wait_ms: 300001 } } }), 400, "invalid_argument");
  error(await api.GET("/v1/runs/{run_id}/steps", { params: { path: { run_id: NOT_FOUND_RUN } } }), 404, "not_found");
  error(await api.GET("/v1/runs/{run_id}/steps", { params: { path: { run_id: BAD_ID } } }), 400, "invalid_argument");
  error(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: NOT_FOUND_RUN } } }), 404, "not_found");
  error(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: BAD_ID } } }), 400, "invalid_argument");
});

test("runs: a delayed run, the long-poll timing out, cancel of a queued run (200)", async () => {
  const run = await submit("ct-delayed", script("delayed", succeed()), { delay_ms: LONG });
  assert.equal(run.status, "scheduled");
  assert.match(run.next_attempt_at ?? "", TIMESTAMP);
  const t0 = Date.now();
  const polled = status(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: "ct-delayed" }, query: { wait_ms: 300 } } }), 200).data!;
  assert.equal(polled.status, "scheduled", "after wait_ms the run comes as it stands");
  assert.ok(Date.now() - t0 >= 250, "the long-poll waited");
  const c = status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: "ct-delayed" } } }), 200).data!;
  assert.equal(c.status, "cancelled");
  assert.equal(c.cancel_requested, true);
  assert.equal(c.error, null);
  const cb = await hook.callback("ct-delayed");
  assert.equal(cb.body.status, "cancelled");
  assert.equal(cb.body.error, null);
  assert.deepEqual(await history("ct-delayed"), [], "the step never ran");
});

test("runs: cancel of a running step (202) aborts the webhook call", async () => {
  await submit("ct-hang", script("hang", { do: "hang" }));
  await hook.step("ct-hang", 0);
  const c = status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: "ct-hang" } } }), 202).data!;
  assert.equal(c.status, "cancelling");
  assert.equal(c.cancel_requested, true);
  await hook.waitAborted("abort of ct-hang's call", (d) => d.kind === "step" && d.body?.run_id === "ct-hang");
  const done = await finished("ct-hang");
  assert.equal(done.status, "cancelled");
  assert.equal(done.error, null);
  const steps = await history("ct-hang");
  assert.equal(steps.length, 1);
  assert.equal(steps[0].result, "cancelled");
});

test("runs: outcomes fail and cancel, a transient error retried, a permanent error dead-lettered", async () => {
  await submit("ct-fail", script("fail", { do: "fail", reason: "card declined" }));
  const f = await finished("ct-fail");
  assert.equal(f.status, "failed");
  assert.equal(f.error, "card declined");
  assert.equal(f.error_kind, "permanent");
  assert.equal((await history("ct-fail"))[0].result, "fail");

  await submit("ct-cancel-own", script("cancel", { do: "cancel", reason: "user left", kv: { put: { "app/ct/cancelled": true } } }));
  const c = await finished("ct-cancel-own");
  assert.equal(c.status, "cancelled");
  assert.equal(c.error, "user left");
  assert.equal(c.error_kind, null);
  assert.equal(status(await api.GET("/v1/kv/{key}", { params: { path: { key: "app/ct/cancelled" } } }), 200).data!.value, true);

  const busy = JSON.stringify({ error: { message: "busy", retryable: true } });
  await submit(
    "ct-retry",
    script("retry", { do: "byAttempt", list: [{ do: "http", status: 503, body: busy, headers: { "Retry-After": "0" } }, succeed("second time")] }),
  );
  const r = await finished("ct-retry");
  assert.equal(r.status, "succeeded");
  assert.equal(r.result, "second time");
  const rs = await history("ct-retry");
  assert.deepEqual(rs.map((s) => [s.attempt, s.result, s.http_status]), [
    [1, "transient_error", 503],
    [2, "succeed", 200],
  ]);
  assert.match(rs[0].error ?? "", /^HTTP 503/);
  const ids = hook.steps("ct-retry").map((d) => d.id);
  assert.equal(ids.length, 2);
  assert.equal(ids[0], ids[1], "a retry keeps the webhook-id");

  await submit("ct-dead", script("dead", { do: "byGeneration", list: [{ do: "http", status: 422, body: "no such order" }, cont({ delay_ms: LONG }), succeed({ redriven: true })] }));
  const d = await finished("ct-dead");
  assert.equal(d.status, "failed");
  assert.equal(d.error_kind, "permanent");
  assert.match(d.error ?? "", /^HTTP 422: no such order/);
});

test("dead letters: list, filter, page, redrive (409 then 200), delete", async () => {
  const list = status(await api.GET("/v1/dead-letters", { params: { query: { workflow: WF, kind: "step" } } }), 200).data!;
  const dl = list.dead_letters.find((x) => x.run_id === "ct-dead");
  assert.ok(dl, `a dead letter for ct-dead: ${JSON.stringify(list)}`);
  assert.equal(dl.kind, "step");
  assert.equal(dl.step, 0);
  assert.equal(dl.attempts, 1);
  assert.equal(dl.last_http_status, 422);
  assert.equal(dl.generation, 1);
  assert.ok(!list.dead_letters.some((x) => x.run_id === "ct-fail"), "a fail outcome is not a dead letter");

  // The run is active again (rerun, waiting on a long delay): redrive refused.
  const rr = status(await api.POST("/v1/runs/{run_id}/rerun", { params: { path: { run_id: "ct-dead" } } }), 201).data!;
  assert.equal(rr.generation, 2);
  error(await api.POST("/v1/dead-letters/{id}/redrive", { params: { path: { id: dl.id } } }), 409, "run_active");
  const c = await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: "ct-dead" } } });
  assert.ok([200, 202].includes(c.response.status), `cancel answered ${c.response.status}`);
  assert.equal((await finished("ct-dead")).status, "cancelled");

  const red = status(await api.POST("/v1/dead-letters/{id}/redrive", { params: { path: { id: dl.id } } }), 200).data!;
  assert.deepEqual(red, { id: dl.id, kind: "step", redriven: true });
  const again = await finished("ct-dead");
  assert.equal(again.status, "succeeded");
  assert.equal(again.generation, 3);
  assert.deepEqual(again.result, { redriven: true });
  error(await api.POST("/v1/dead-letters/{id}/redrive", { params: { path: { id: dl.id } } }), 404, "not_found");

  await submit("ct-dead2", script("dead2", { do: "http", status: 400, body: JSON.stringify({ error: { message: "bad", retryable: false } }) }));
  assert.equal((await finished("ct-dead2")).status, "failed");
  await submit("ct-dead3", script("dead3", { do: "http", status: 404 }));
  assert.equal((await finished("ct-dead3")).status, "failed");
  const p1 = status(await api.GET("/v1/dead-letters", { params: { query: { workflow: WF, limit: 1 } } }), 200).data!;
  assert.equal(p1.dead_letters.length, 1);
  assert.equal(p1.dead_letters[0].run_id, "ct-dead3", "newest first");
  assert.ok(p1.next_cursor);
  const p2 = status(await api.GET("/v1/dead-letters", { params: { query: { workflow: WF, limit: 1, cursor: p1.next_cursor! } } }), 200).data!;
  assert.equal(p2.dead_letters[0].run_id, "ct-dead2");
  const id2 = p2.dead_letters[0].id;
  status(await api.DELETE("/v1/dead-letters/{id}", { params: { path: { id: id2 } } }), 204);
  error(await api.DELETE("/v1/dead-letters/{id}", { params: { path: { id: id2 } } }), 404, "not_found");
  error(await api.DELETE("/v1/dead-letters/{id}", { params: { path: { id: BAD_ID } } }), 400, "invalid_argument");
  error(await api.POST("/v1/dead-letters/{id}/redrive", { params: { path: { id: BAD_ID } } }), 400, "invalid_argument");
  error(await api.GET("/v1/dead-letters", { params: { query: { kind: "bogus" as any } } }), 400, "invalid_argument");
});

// ---- signals ---------------------------------------------------------------

test("signals: delivered to a waiting run, buffered then consumed, cleared, timeout, one waiter per key", async () => {
  await submit("ct-sig", script("sig", cont({ wait: { key: "ct-key-1", timeout_ms: LONG } }), succeed("signalled")));
  const waiting = await runWithStatus("ct-sig", "waiting");
  assert.equal(waiting.waiting?.correlation_key, "ct-key-1");
  assert.deepEqual(waiting.waiting?.correlation_keys, ["ct-key-1"], "a wait on one key lists it");
  assert.equal(waiting.waiting?.children, null, "a signal wait waits for no children");
  assert.match(waiting.waiting?.timeout_at ?? "", TIMESTAMP);
  assert.equal(waiting.step, 1);

  // While a run is active its workflow cannot be deleted.
  error(await api.DELETE("/v1/workflows/{name}", { params: { path: { name: WF } } }), 409, "workflow_in_use");

  const s = status(await api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-key-1" } }, body: { payload: { paid: true } } }), 200).data!;
  assert.deepEqual(s, { outcome: "delivered" });
  assert.equal((await finished("ct-sig")).status, "succeeded");
  const step1 = await hook.step("ct-sig", 1);
  assert.deepEqual(step1.body.signal, { status: "delivered", payload: { paid: true } });
  const h = await history("ct-sig");
  assert.deepEqual(h[1].signal, { status: "delivered", payload: { paid: true } });

  const buffered = status(await api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-key-2" } } }), 200).data!;
  assert.deepEqual(buffered, { outcome: "buffered" });
  assert.deepEqual(status(await api.DELETE("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-key-2" } } }), 200).data, { removed: true });
  assert.deepEqual(status(await api.DELETE("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-key-2" } } }), 200).data, { removed: false });

  status(await api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-key-3" } }, body: { payload: 7 } }), 200);
  await submit("ct-sig-buf", script("sigbuf", cont({ wait: { key: "ct-key-3", timeout_ms: LONG } }), succeed()));
  assert.equal((await finished("ct-sig-buf")).status, "succeeded");
  assert.deepEqual((await hook.step("ct-sig-buf", 1)).body.signal, { status: "delivered", payload: 7 });

  await submit("ct-sig-timeout", script("sigto", cont({ wait: { key: "ct-key-4", timeout_ms: 50 } }), succeed()));
  assert.equal((await finished("ct-sig-timeout")).status, "succeeded");
  assert.deepEqual((await hook.step("ct-sig-timeout", 1)).body.signal, { status: "timeout" });

  await submit("ct-waiter-a", script("wa", cont({ wait: { key: "ct-key-5", timeout_ms: LONG } }), succeed()));
  await runWithStatus("ct-waiter-a", "waiting");
  await submit("ct-waiter-b", script("wb", cont({ wait: { key: "ct-key-5", timeout_ms: LONG } }), succeed()));
  const b = await finished("ct-waiter-b");
  assert.equal(b.status, "failed");
  assert.equal(b.error, "a waiter is already registered for correlation key ct-key-5");
  assert.equal(b.error_kind, "permanent");
  const ca = status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: "ct-waiter-a" } } }), 200).data!;
  assert.equal(ca.status, "cancelled");
  assert.equal(ca.waiting, null);

  error(await api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: LONG_KEY } } }), 400, "invalid_argument");
  error(await api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-key-6" } }, body: { payload: 1, colour: 2 } as any }), 400, "invalid_argument");
  error(await api.DELETE("/v1/signals/{correlation_key}", { params: { path: { correlation_key: LONG_KEY } } }), 400, "invalid_argument");
  await badBodies("POST signal", (init) =>
    api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-key-6" } }, body: { payload: 1 }, ...init }),
  );
});

test("signals: the first signal on any of several keys wakes the run and names its key; the oldest buffered is taken", async () => {
  // Keys are listed in key order; correlation_key is the first key the answer gave.
  await submit("ct-any", script("any", cont({ wait: { keys: ["ct-any-b", "ct-any-a"], timeout_ms: LONG } }), succeed()));
  const w = await runWithStatus("ct-any", "waiting");
  assert.deepEqual(w.waiting, { correlation_key: "ct-any-b", correlation_keys: ["ct-any-a", "ct-any-b"], children: null, timeout_at: w.waiting!.timeout_at });
  const sa = status(await api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-any-a" } }, body: { payload: { refund: 1 } } }), 200).data!;
  assert.deepEqual(sa, { outcome: "delivered" });
  assert.equal((await finished("ct-any")).status, "succeeded");
  const delivered = { status: "delivered", correlation_key: "ct-any-a", payload: { refund: 1 } };
  assert.deepEqual((await hook.step("ct-any", 1)).body.signal, delivered);
  assert.deepEqual((await history("ct-any"))[1].signal, delivered);
  // The wait on the other key ended with it: a signal there is buffered.
  const sb = status(await api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-any-b" } } }), 200).data!;
  assert.deepEqual(sb, { outcome: "buffered" });

  // ct-any-b is buffered, then ct-any-c: a wait on both takes the older at once.
  status(await api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-any-c" } }, body: { payload: "c" } }), 200);
  await submit("ct-any-buf", script("anybuf", cont({ wait: { keys: ["ct-any-c", "ct-any-b"], timeout_ms: LONG } }), succeed()));
  assert.equal((await finished("ct-any-buf")).status, "succeeded");
  assert.deepEqual((await hook.step("ct-any-buf", 1)).body.signal, { status: "delivered", correlation_key: "ct-any-b", payload: null });
  assert.deepEqual(status(await api.DELETE("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-any-c" } } }), 200).data, { removed: true });

  // One waiter per key still holds: a wait on several keys, one of them taken, fails naming it.
  await submit("ct-any-x", script("anyx", cont({ wait: { key: "ct-any-x", timeout_ms: LONG } }), succeed()));
  await runWithStatus("ct-any-x", "waiting");
  await submit("ct-any-y", script("anyy", cont({ wait: { keys: ["ct-any-y", "ct-any-x"], timeout_ms: LONG } }), succeed()));
  const y = await finished("ct-any-y");
  assert.deepEqual([y.status, y.error, y.error_kind], ["failed", "a waiter is already registered for correlation key ct-any-x", "permanent"]);
  status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: "ct-any-x" } } }), 200);
  // The failed wait registered nothing: its other key has no waiter.
  assert.deepEqual(status(await api.POST("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-any-y" } } }), 200).data, { outcome: "buffered" });
  status(await api.DELETE("/v1/signals/{correlation_key}", { params: { path: { correlation_key: "ct-any-y" } } }), 200);
});

// ---- child runs ----------------------------------------------------------------

const WF_CHILD = "ct-child"; // the children's workflow (steps on the scripted webhook)
const WF_ABANDON = "ct-abandon"; // a parent workflow whose cancel leaves its children running

/** The run id of child `key` of step `step` of generation `generation` of run `parent`. */
const childId = (parent: string, key: string, step = 0, generation = 1) => sha256hex(`${parent}/${generation}/${step}/${key}`);

test("child runs: started by a step, waited for, listed to the next step and by GET /v1/runs/{id}/children", async () => {
  const wf = status(
    await api.PUT("/v1/workflows/{name}", {
      params: { path: { name: WF_CHILD } },
      body: { url: hook.url("/step"), callback_url: hook.url("/callback/ok"), secret: hook.secret, retry_backoff: { base_ms: 20, max_ms: 200 } },
    }),
    201,
  ).data!;
  assert.equal(wf.on_parent_cancel, "cancel", "the default");
  const id = "ct-parent";
  // b stays active (its step 1 is an hour away) until it is cancelled below.
  const children = [
    { key: "b", workflow: WF_CHILD, input: script("cb", cont({ delay_ms: 3600000 }), succeed()) },
    { key: "a", workflow: WF_CHILD, input: script("ca", succeed("A")), headers: { tenant: "a" }, concurrency_key: "ct-child-a" },
    { key: "c", workflow: WF_CHILD, input: script("cc", { do: "fail", reason: "no C" }) },
  ];
  await submit(id, script(id, cont({ children, wait_children: { mode: "all", timeout_ms: LONG } }), succeed("parent done")));
  const ids = { a: childId(id, "a"), b: childId(id, "b"), c: childId(id, "c") };

  const waiting = await runWithStatus(id, "waiting");
  assert.deepEqual(waiting.waiting?.children, { mode: "all", count: 3, step: 0 });
  assert.deepEqual([waiting.waiting?.correlation_key, waiting.waiting?.correlation_keys], [null, null]);
  assert.ok(Date.parse(waiting.waiting!.timeout_at) > Date.now(), "the wait's timeout is ahead");
  assert.equal(waiting.step, 1);
  assert.equal(waiting.parent, null, "a submitted run has no parent");

  const a = await finished(ids.a);
  assert.deepEqual([a.status, a.result, a.workflow, a.concurrency_key], ["succeeded", "A", WF_CHILD, "ct-child-a"]);
  assert.deepEqual(a.parent, { run_id: id, generation: 1, step: 0, key: "a" });
  assert.deepEqual(a.headers, { tenant: "a" });
  assert.deepEqual(a.input, children[1].input);
  assert.deepEqual((await finished(ids.c)).error, "no C");
  const b = await runWithStatus(ids.b, "scheduled");
  assert.deepEqual(b.parent, { run_id: id, generation: 1, step: 0, key: "b" });
  assert.equal((await getRun(id)).status, "waiting", "mode all: one child is still active");

  // GET /v1/runs/{id}/children: by generation, step, then key; paged.
  const page = (query: { limit?: number; cursor?: string }) =>
    api.GET("/v1/runs/{run_id}/children", { params: { path: { run_id: id }, query } });
  const all = status(await page({}), 200).data!;
  assert.deepEqual(all.children.map((c) => c.run_id), [ids.a, ids.b, ids.c]);
  assert.equal(all.next_cursor, null);
  assert.deepEqual(all.children[0], await getRun(ids.a), "a listed child is its run object");
  const p1 = status(await page({ limit: 2 }), 200).data!;
  assert.deepEqual(p1.children.map((c) => c.parent?.key), ["a", "b"]);
  assert.ok(p1.next_cursor);
  const p2 = status(await page({ limit: 2, cursor: p1.next_cursor! }), 200).data!;
  assert.deepEqual([p2.children.map((c) => c.parent?.key), p2.next_cursor], [["c"], null]);
  assert.deepEqual(status(await api.GET("/v1/runs/{run_id}/children", { params: { path: { run_id: ids.a } } }), 200).data, { children: [], next_cursor: null });
  error(await api.GET("/v1/runs/{run_id}/children", { params: { path: { run_id: NOT_FOUND_RUN } } }), 404, "not_found");
  error(await api.GET("/v1/runs/{run_id}/children", { params: { path: { run_id: BAD_ID } } }), 400, "invalid_argument");
  error(await page({ limit: 1001 }), 400, "invalid_argument");
  error(await page({ cursor: "nope!" }), 400, "invalid_argument");

  // The last child ends (an external cancel, its error null): the parent's next step runs with them all.
  status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: ids.b } } }), 200);
  const done = await finished(id);
  assert.deepEqual([done.status, done.result, done.waiting], ["succeeded", "parent done", null]);
  const s1 = await hook.step(id, 1);
  assert.deepEqual(s1.body.children, [
    { key: "a", run_id: ids.a, status: "succeeded", result: "A", error: null },
    { key: "b", run_id: ids.b, status: "cancelled", result: null, error: null },
    { key: "c", run_id: ids.c, status: "failed", result: null, error: "no C" },
  ]);
  assert.equal(s1.body.signal, undefined);
  assert.equal((await hook.step(id, 0)).body.children, undefined, "only the step after the wait hears of the children");
});

test("child runs: an unknown workflow fails the step permanently; a wait that times out lists the active child as timeout", async () => {
  await submit("ct-parent-bad", script("pbad", cont({ children: [{ key: "x", workflow: "ct-nope" }] })));
  const bad = await finished("ct-parent-bad");
  assert.deepEqual([bad.status, bad.error, bad.error_kind], ["failed", "children[0].workflow: workflow ct-nope not found", "permanent"]);
  assert.deepEqual(status(await api.GET("/v1/runs/{run_id}/children", { params: { path: { run_id: "ct-parent-bad" } } }), 200).data, { children: [], next_cursor: null });

  const id = "ct-parent-timeout";
  await submit(id, script(id, cont({ children: [{ key: "slow", workflow: WF_CHILD, input: script("slow", cont({ delay_ms: 3600000 }), succeed()) }], wait_children: { mode: "any", timeout_ms: 200 } }), succeed()));
  assert.equal((await finished(id)).status, "succeeded");
  const slow = childId(id, "slow");
  assert.deepEqual((await hook.step(id, 1)).body.children, [{ key: "slow", run_id: slow, status: "timeout", result: null, error: null }]);
  await runWithStatus(slow, "scheduled"); // a child the wait gave up on goes on
  status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: slow } } }), 200);
});

test("child runs: cancelling a parent cancels its active children, unless its workflow's on_parent_cancel is abandon", async () => {
  const later = (t: string) => script(t, cont({ delay_ms: 3600000 }), succeed());
  const id = "ct-parent-cancel";
  await submit(id, script(id, cont({ children: [{ key: "k", workflow: WF_CHILD, input: later("k") }] }), succeed()));
  const kid = childId(id, "k");
  await runWithStatus(id, "waiting"); // its children exist from then on
  await runWithStatus(kid, "scheduled");
  const c = status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: id } } }), 200).data!;
  assert.deepEqual([c.status, c.error], ["cancelled", null]);
  const k = await finished(kid);
  assert.deepEqual([k.status, k.error, k.error_kind], ["cancelled", `parent ${id} cancelled`, null]);
  const cb = await hook.callback(kid);
  assert.deepEqual([cb.body.status, cb.body.error], ["cancelled", `parent ${id} cancelled`]);

  const put = (on_parent_cancel: unknown) =>
    api.PUT("/v1/workflows/{name}", { params: { path: { name: WF_ABANDON } }, body: { url: hook.url("/step"), secret: hook.secret, on_parent_cancel } as any });
  for (const bad of ["keep", "", "CANCEL", 1])
    assert.match(error(await put(bad), 400, "invalid_argument"), /on_parent_cancel/);
  assert.equal(status(await put("abandon"), 201).data!.on_parent_cancel, "abandon");
  assert.equal(status(await api.GET("/v1/workflows/{name}", { params: { path: { name: WF_ABANDON } } }), 200).data!.on_parent_cancel, "abandon");
  const ab = "ct-parent-abandon";
  await submit(ab, script(ab, cont({ children: [{ key: "k", workflow: WF_CHILD, input: later("k2") }] }), succeed()), {}, WF_ABANDON);
  const kept = childId(ab, "k");
  await runWithStatus(ab, "waiting");
  await runWithStatus(kept, "scheduled");
  status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: ab } } }), 200);
  const still = await getRun(kept);
  assert.deepEqual([still.status, still.cancel_requested], ["scheduled", false], "an abandoned child goes on");
  status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: kept } } }), 200);
});

// ---- memo --------------------------------------------------------------------

test("memo: run and step scope with the delivery token, 403 with another run's, 404s, invalid input", async () => {
  // Two runs whose step 0 continues an hour later: active, so their delivery
  // tokens stay valid (a token stops working when its run ends).
  const later = (id: string) => script(id, { do: "continue", delay_ms: 3600000 }, { do: "succeed" });
  await submit("ct-memo-a", later("ct-memo-a"));
  await submit("ct-memo-b", later("ct-memo-b"));
  const tokA = (await hook.step("ct-memo-a", 0)).body.memo.token;
  const tokB = (await hook.step("ct-memo-b", 0)).body.memo.token;
  assert.notEqual(tokA, tokB);
  const asA = { Authorization: `Bearer ${tokA}` };
  const asB = { Authorization: `Bearer ${tokB}` };
  const run = { path: { run_id: "ct-memo-a", key: "charge" } };
  const stepScope = (n: number) => ({ path: { run_id: "ct-memo-a", step: n, key: "charge" } });

  assert.deepEqual(status(await api.PUT("/v1/runs/{run_id}/memo/{key}", { params: run, body: { value: { id: "ch_1" } }, headers: asA }), 200).data, { value: { id: "ch_1" } });
  assert.deepEqual(status(await api.GET("/v1/runs/{run_id}/memo/{key}", { params: run, headers: asA }), 200).data, { value: { id: "ch_1" } });
  status(await api.DELETE("/v1/runs/{run_id}/memo/{key}", { params: run, headers: asA }), 204);
  error(await api.GET("/v1/runs/{run_id}/memo/{key}", { params: run, headers: asA }), 404, "not_found");
  status(await api.DELETE("/v1/runs/{run_id}/memo/{key}", { params: run, headers: asA }), 204);

  assert.deepEqual(status(await api.PUT("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: stepScope(1), body: { value: [1, 2] }, headers: asA }), 200).data, { value: [1, 2] });
  assert.deepEqual(status(await api.GET("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: stepScope(1), headers: asA }), 200).data, { value: [1, 2] });
  error(await api.GET("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: stepScope(2), headers: asA }), 404, "not_found");
  error(await api.GET("/v1/runs/{run_id}/memo/{key}", { params: run, headers: asA }), 404, "not_found");
  status(await api.DELETE("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: stepScope(1), headers: asA }), 204);
  error(await api.GET("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: stepScope(1), headers: asA }), 404, "not_found");

  // Another run's delivery token: refused on every memo operation.
  error(await api.GET("/v1/runs/{run_id}/memo/{key}", { params: run, headers: asB }), 403, "forbidden");
  error(await api.PUT("/v1/runs/{run_id}/memo/{key}", { params: run, body: { value: 1 }, headers: asB }), 403, "forbidden");
  error(await api.DELETE("/v1/runs/{run_id}/memo/{key}", { params: run, headers: asB }), 403, "forbidden");
  error(await api.GET("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: stepScope(0), headers: asB }), 403, "forbidden");
  error(await api.PUT("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: stepScope(0), body: { value: 1 }, headers: asB }), 403, "forbidden");
  error(await api.DELETE("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: stepScope(0), headers: asB }), 403, "forbidden");

  // Once its run ends, the token opens nothing.
  // (200 once step 0 has settled, 202 if it is still being settled.)
  for (const id of ["ct-memo-a", "ct-memo-b"]) {
    const c = await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: id } } });
    assert.ok([200, 202].includes(c.response.status), `cancel ${id}: ${c.response.status}`);
  }
  await finished("ct-memo-a");
  error(await api.GET("/v1/runs/{run_id}/memo/{key}", { params: run, headers: asA }), 403, "forbidden");

  // Without tokens configured, no credential at all is let through.
  const none = { path: { run_id: NOT_FOUND_RUN, key: "k" } };
  error(await api.PUT("/v1/runs/{run_id}/memo/{key}", { params: none, body: { value: 1 } }), 404, "not_found");
  error(await api.PUT("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: { path: { ...none.path, step: 0 } }, body: { value: 1 } }), 404, "not_found");

  const bad = { path: { run_id: BAD_ID, key: "k" } };
  error(await api.GET("/v1/runs/{run_id}/memo/{key}", { params: bad }), 400, "invalid_argument");
  error(await api.PUT("/v1/runs/{run_id}/memo/{key}", { params: bad, body: { value: 1 } }), 400, "invalid_argument");
  error(await api.DELETE("/v1/runs/{run_id}/memo/{key}", { params: bad }), 400, "invalid_argument");
  const badStep = { path: { run_id: "ct-happy", step: "x" as unknown as number, key: "k" } };
  error(await api.GET("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: badStep }), 400, "invalid_argument");
  error(await api.PUT("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: badStep, body: { value: 1 } }), 400, "invalid_argument");
  error(await api.DELETE("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: badStep }), 400, "invalid_argument");
  const big = { value: "x".repeat(300 * 1024) };
  assert.match(error(await api.PUT("/v1/runs/{run_id}/memo/{key}", { params: run, body: big, headers: asA }), 400, "invalid_argument"), /value/);
  error(await api.PUT("/v1/runs/{run_id}/memo/{key}", { params: run, body: {} as any, headers: asA }), 400, "invalid_argument");
  await badBodies("PUT run memo", (init) => api.PUT("/v1/runs/{run_id}/memo/{key}", { params: run, body: { value: 1 }, ...init }));
  await badBodies("PUT step memo", (init) =>
    api.PUT("/v1/runs/{run_id}/steps/{step}/memo/{key}", { params: stepScope(0), body: { value: 1 }, ...init }),
  );
});

// ---- kv ----------------------------------------------------------------------

test("kv: put, get, list with a prefix and pages, delete, reserved keys, submission effects", async () => {
  const k1 = status(await api.PUT("/v1/kv/{key}", { params: { path: { key: "app/ct/k1" } }, body: { value: { a: 1 } } }), 200).data!;
  assert.equal(k1.key, "app/ct/k1");
  assert.deepEqual(k1.value, { a: 1 });
  status(await api.PUT("/v1/kv/{key}", { params: { path: { key: "app/ct/k2" } }, body: { value: [2] } }), 200);
  assert.deepEqual(status(await api.GET("/v1/kv/{key}", { params: { path: { key: "app/ct/k1" } } }), 200).data!.value, { a: 1 });
  const p1 = status(await api.GET("/v1/kv", { params: { query: { prefix: "app/ct/k", limit: 1 } } }), 200).data!;
  assert.deepEqual(p1.items.map((i) => i.key), ["app/ct/k1"]);
  assert.ok(p1.next_cursor);
  const p2 = status(await api.GET("/v1/kv", { params: { query: { prefix: "app/ct/k", limit: 1, cursor: p1.next_cursor! } } }), 200).data!;
  assert.deepEqual(p2.items.map((i) => i.key), ["app/ct/k2"]);
  const all = status(await api.GET("/v1/kv", { params: { query: { prefix: "app/ct/k" } } }), 200).data!;
  assert.equal(all.items.length, 2);
  assert.equal(all.next_cursor, null);

  status(await api.DELETE("/v1/kv/{key}", { params: { path: { key: "app/ct/k1" } } }), 204);
  error(await api.GET("/v1/kv/{key}", { params: { path: { key: "app/ct/k1" } } }), 404, "not_found");
  status(await api.DELETE("/v1/kv/{key}", { params: { path: { key: "app/ct/k1" } } }), 204);

  assert.match(error(await api.PUT("/v1/kv/{key}", { params: { path: { key: "workflow/x" } }, body: { value: 1 } }), 400, "invalid_argument"), /reserved/);
  error(await api.DELETE("/v1/kv/{key}", { params: { path: { key: "workflow/x" } } }), 400, "invalid_argument");
  error(await api.GET("/v1/kv/{key}", { params: { path: { key: LONG_KEY } } }), 400, "invalid_argument");
  error(await api.GET("/v1/kv", { params: { query: { limit: 0 } } }), 400, "invalid_argument");
  error(await api.PUT("/v1/kv/{key}", { params: { path: { key: "app/ct/big" } }, body: { value: "x".repeat(300 * 1024) } }), 400, "invalid_argument");
  await badBodies("PUT kv", (init) => api.PUT("/v1/kv/{key}", { params: { path: { key: "app/ct/k3" } }, body: { value: 1 }, ...init }));

  const input = script("kvsub", succeed());
  await submit("ct-kvsub", input, { delay_ms: LONG, kv: { put: { "app/ct/sub": 1 }, delete: ["app/ct/k2"] } });
  assert.equal(status(await api.GET("/v1/kv/{key}", { params: { path: { key: "app/ct/sub" } } }), 200).data!.value, 1);
  error(await api.GET("/v1/kv/{key}", { params: { path: { key: "app/ct/k2" } } }), 404, "not_found");
  const dup = status(await api.POST("/v1/runs", { body: { workflow: WF, run_id: "ct-kvsub", input, kv: { put: { "app/ct/sub2": 1 } } } }), 200).data!;
  assert.equal(dup.newly_submitted, false);
  error(await api.GET("/v1/kv/{key}", { params: { path: { key: "app/ct/sub2" } } }), 404, "not_found");
});

// ---- rerun -------------------------------------------------------------------

test("rerun: from a later step keeps memos, with a new input, refused while active or unreached", async () => {
  const run = { path: { run_id: "ct-happy", key: "kept" } };
  status(await api.PUT("/v1/runs/{run_id}/memo/{key}", { params: run, body: { value: "paid once" } }), 200);
  const before = await history("ct-happy");
  const rr = status(await api.POST("/v1/runs/{run_id}/rerun", { params: { path: { run_id: "ct-happy" } }, body: { from_step: 1 } }), 201).data!;
  assert.equal(rr.generation, 2);
  assert.equal(rr.step, 1);
  assert.equal(rr.finished_at, null);
  const done = await finished("ct-happy");
  assert.equal(done.status, "succeeded");
  assert.equal(done.generation, 2);
  const after = (await history("ct-happy")).filter((s) => s.generation === 2);
  assert.deepEqual(after.map((s) => s.step), [1, 2]);
  assert.deepEqual(after[0].payload, before[1].payload, "the recorded payload of step 1");
  assert.deepEqual(status(await api.GET("/v1/runs/{run_id}/memo/{key}", { params: run }), 200).data, { value: "paid once" });
  const cb2 = await hook.callback("ct-happy", 2);
  assert.equal(cb2.body.generation, 2);

  const fresh = script("refail", succeed("new input"));
  status(await api.POST("/v1/runs/{run_id}/rerun", { params: { path: { run_id: "ct-fail" } }, body: { input: fresh } }), 201);
  const f = await finished("ct-fail");
  assert.equal(f.status, "succeeded");
  assert.equal(f.result, "new input");
  assert.deepEqual(f.input, fresh);

  error(await api.POST("/v1/runs/{run_id}/rerun", { params: { path: { run_id: "ct-kvsub" } } }), 409, "run_active");
  assert.match(error(await api.POST("/v1/runs/{run_id}/rerun", { params: { path: { run_id: "ct-happy" } }, body: { from_step: 99 } }), 400, "invalid_argument"), /from_step/);
  assert.match(error(await api.POST("/v1/runs/{run_id}/rerun", { params: { path: { run_id: "ct-happy" } }, body: { from_step: 1, input: 1 } }), 400, "invalid_argument"), /input/);
  error(await api.POST("/v1/runs/{run_id}/rerun", { params: { path: { run_id: NOT_FOUND_RUN } } }), 404, "not_found");
  error(await api.POST("/v1/runs/{run_id}/rerun", { params: { path: { run_id: BAD_ID } } }), 400, "invalid_argument");
  await badBodies("POST rerun", (init) =>
    api.POST("/v1/runs/{run_id}/rerun", { params: { path: { run_id: "ct-happy" } }, body: { from_step: 0 }, ...init }),
  );
  status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: "ct-kvsub" } } }), 200);
});

// ---- groups ------------------------------------------------------------------

test("groups: submit, wait, page, resubmit, 409s, cancel, forget", async () => {
  const G = "ct-g1";
  const members = [
    { key: "a", input: script("ga", succeed("A")), concurrency_key: "ct-ga" },
    { key: "b", input: script("gb", { do: "byGeneration", list: [{ do: "fail", reason: "no" }, cont({ delay_ms: LONG })] }), headers: { tenant: "b" } },
  ];
  const body = { workflow: WF, headers: { tenant: "g" }, members };
  const g = status(await api.PUT("/v1/groups/{group_id}", { params: { path: { group_id: G } }, body }), 201).data!;
  assert.equal(g.total, 2);
  assert.equal(g.submitted, 2);
  const idA = sha256hex(`${G}/a`);
  const idB = sha256hex(`${G}/b`);
  assert.deepEqual(g.members.map((m) => [m.key, m.run_id]), [["a", idA], ["b", idB]]);

  const w = status(await api.GET("/v1/groups/{group_id}", { params: { path: { group_id: G }, query: { wait_ms: 20000 } } }), 200).data!;
  assert.deepEqual([w.succeeded, w.failed, w.pending, w.running, w.cancelled], [1, 1, 0, 0, 0]);
  assert.equal(w.members.find((m) => m.key === "a")?.result, "A");
  assert.equal(w.members.find((m) => m.key === "b")?.error, "no");

  const sa = await hook.step(idA, 0);
  assert.deepEqual(sa.body.group, { id: G, key: "a" });
  assert.equal(sa.body.concurrency_key, "ct-ga");
  assert.equal((await hook.step(idB, 0)).body.concurrency_key, null);
  assert.deepEqual(sa.body.headers, { tenant: "g" });
  assert.deepEqual((await hook.step(idB, 0)).body.headers, { tenant: "b" }, "a member's headers win");
  assert.deepEqual((await getRun(idA)).group, { id: G, key: "a" });
  assert.equal((await getRun(idA)).concurrency_key, "ct-ga");
  assert.deepEqual((await hook.callback(idA)).body.group, { id: G, key: "a" });

  const p1 = status(await api.GET("/v1/groups/{group_id}", { params: { path: { group_id: G }, query: { limit: 1 } } }), 200).data!;
  assert.deepEqual(p1.members.map((m) => m.key), ["a"]);
  assert.ok(p1.next_cursor);
  const p2 = status(await api.GET("/v1/groups/{group_id}", { params: { path: { group_id: G }, query: { limit: 1, cursor: p1.next_cursor! } } }), 200).data!;
  assert.deepEqual(p2.members.map((m) => m.key), ["b"]);
  assert.equal(p2.next_cursor, null);
  const runs = status(await api.GET("/v1/runs", { params: { query: { group_id: G } } }), 200).data!;
  assert.deepEqual(runs.runs.map((r) => r.run_id).sort(), [idA, idB].sort());

  const again = status(await api.PUT("/v1/groups/{group_id}", { params: { path: { group_id: G } }, body }), 200).data!;
  assert.equal(again.submitted, 1, "only the failed member runs again");
  error(await api.DELETE("/v1/groups/{group_id}", { params: { path: { group_id: G } } }), 409, "group_active");
  assert.deepEqual(status(await api.POST("/v1/groups/{group_id}/cancel", { params: { path: { group_id: G } } }), 200).data, { cancelled: 1 });
  const end = status(await api.GET("/v1/groups/{group_id}", { params: { path: { group_id: G }, query: { wait_ms: 20000 } } }), 200).data!;
  assert.deepEqual([end.succeeded, end.cancelled, end.pending, end.running], [1, 1, 0, 0]);
  status(await api.DELETE("/v1/groups/{group_id}", { params: { path: { group_id: G } } }), 204);
  error(await api.DELETE("/v1/groups/{group_id}", { params: { path: { group_id: G } } }), 404, "not_found");
  error(await api.GET("/v1/groups/{group_id}", { params: { path: { group_id: G } } }), 404, "not_found");
  error(await api.POST("/v1/groups/{group_id}/cancel", { params: { path: { group_id: G } } }), 404, "not_found");
  error(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: idA } } }), 404, "not_found");

  const G2 = "ct-g2";
  status(await api.PUT("/v1/groups/{group_id}", { params: { path: { group_id: G2 } }, body: { workflow: WF, members: [{ key: "x", input: script("gx", succeed()) }] } }), 201);
  error(await api.PUT("/v1/groups/{group_id}", { params: { path: { group_id: G2 } }, body: { workflow: WF, members: [{ key: "y" }] } }), 409, "group_mismatch");
  assert.match(error(await api.PUT("/v1/groups/{group_id}", { params: { path: { group_id: "ct-g3" } }, body: { workflow: WF, members: [{ key: "x" }, { key: "x" }] } }), 400, "invalid_argument"), /duplicate/);
  error(await api.PUT("/v1/groups/{group_id}", { params: { path: { group_id: "ct-g3" } }, body: { workflow: "ct-nope", members: [{ key: "x" }] } }), 404, "not_found");
  error(await api.PUT("/v1/groups/{group_id}", { params: { path: { group_id: BAD_ID } }, body: { workflow: WF, members: [{ key: "x" }] } }), 400, "invalid_argument");
  error(await api.GET("/v1/groups/{group_id}", { params: { path: { group_id: BAD_ID } } }), 400, "invalid_argument");
  error(await api.DELETE("/v1/groups/{group_id}", { params: { path: { group_id: BAD_ID } } }), 400, "invalid_argument");
  error(await api.POST("/v1/groups/{group_id}/cancel", { params: { path: { group_id: BAD_ID } } }), 400, "invalid_argument");
  await badBodies("PUT group", (init) =>
    api.PUT("/v1/groups/{group_id}", { params: { path: { group_id: "ct-g3" } }, body: { workflow: WF, members: [{ key: "x" }] }, ...init }),
  );
  status(await api.GET("/v1/groups/{group_id}", { params: { path: { group_id: G2 }, query: { wait_ms: 20000 } } }), 200);
});

// ---- bulk cancel and lists -----------------------------------------------------

test("bulk cancel: POST /v1/runs:cancel by workflow and status", async () => {
  await submit("ct-bulk-1", script("bulk", succeed()), { delay_ms: LONG }, WF_BULK);
  await submit("ct-bulk-2", script("bulk", succeed()), { delay_ms: LONG }, WF_BULK);
  assert.deepEqual(status(await api.POST("/v1/runs:cancel", { body: { workflow: WF_BULK, status: ["scheduled"] } }), 200).data, { cancelled: 2 });
  assert.deepEqual(status(await api.POST("/v1/runs:cancel", { body: { workflow: WF_BULK } }), 200).data, { cancelled: 0 });
  assert.equal((await getRun("ct-bulk-1")).status, "cancelled");
  assert.equal((await getRun("ct-bulk-2")).status, "cancelled");
  assert.match(error(await api.POST("/v1/runs:cancel", { body: {} }), 400, "invalid_argument"), /at least one/);
  error(await api.POST("/v1/runs:cancel", { body: { status: ["nope"] as any } }), 400, "invalid_argument");
  error(await api.POST("/v1/runs:cancel", { body: { status: [] } }), 400, "invalid_argument");
  error(await api.POST("/v1/runs:cancel", { body: { created_before: "yesterday" } }), 400, "invalid_argument");
  await badBodies("POST runs:cancel", (init) => api.POST("/v1/runs:cancel", { body: { workflow: WF_BULK }, ...init }));
});

test("runs list: newest first, filters, pages", async () => {
  const p1 = status(await api.GET("/v1/runs", { params: { query: { workflow: WF, limit: 2 } } }), 200).data!;
  assert.equal(p1.runs.length, 2);
  assert.ok(p1.next_cursor);
  const p2 = status(await api.GET("/v1/runs", { params: { query: { workflow: WF, limit: 2, cursor: p1.next_cursor! } } }), 200).data!;
  assert.equal(p2.runs.length, 2);
  const seq = [...p1.runs, ...p2.runs];
  for (let i = 1; i < seq.length; i++) assert.ok(seq[i - 1].created_at >= seq[i].created_at, "newest first");
  assert.equal(new Set(seq.map((r) => r.run_id)).size, 4, "pages do not overlap");
  const ok = status(await api.GET("/v1/runs", { params: { query: { status: "succeeded,failed" } } }), 200).data!;
  assert.ok(ok.runs.length > 0);
  assert.ok(ok.runs.every((r) => r.status === "succeeded" || r.status === "failed"));
  const keyed = status(await api.GET("/v1/runs", { params: { query: { concurrency_key: "ct-key é", limit: 1 } } }), 200).data!;
  assert.deepEqual([keyed.runs.map((r) => r.run_id), keyed.next_cursor], [["ct-happy"], null]);
  const keyedWf = status(await api.GET("/v1/runs", { params: { query: { concurrency_key: "ct-key é", workflow: WF_CB } } }), 200).data!;
  assert.deepEqual(keyedWf.runs, []);
  error(await api.GET("/v1/runs", { params: { query: { concurrency_key: "k".repeat(257) } } }), 400, "invalid_argument");
  const none = status(await api.GET("/v1/runs", { params: { query: { created_after: "2999-01-01T00:00:00.000Z" } } }), 200).data!;
  assert.deepEqual(none, { runs: [], next_cursor: null });
  error(await api.GET("/v1/runs", { params: { query: { status: "bogus" } } }), 400, "invalid_argument");
  error(await api.GET("/v1/runs", { params: { query: { created_before: "yesterday" } } }), 400, "invalid_argument");
});

test("callbacks: a refused callback is dead-lettered, and redriven", async () => {
  await submit("ct-cb", script("cb", succeed("cb")), {}, WF_CB);
  assert.equal((await finished("ct-cb")).status, "succeeded");
  const first = await hook.callback("ct-cb");
  const dl = await until("the callback's dead letter", async () => {
    const l = status(await api.GET("/v1/dead-letters", { params: { query: { workflow: WF_CB, kind: "callback" } } }), 200).data!;
    return l.dead_letters.find((d) => d.run_id === "ct-cb");
  });
  assert.equal(dl.kind, "callback");
  assert.equal(dl.step, null);
  assert.equal(dl.id, first.id, "the dead letter's id is the callback's webhook-id");
  assert.equal(dl.last_http_status, 400);
  assert.equal((dl.payload as any).run_id, "ct-cb");
  assert.deepEqual(status(await api.POST("/v1/dead-letters/{id}/redrive", { params: { path: { id: dl.id } } }), 200).data, { id: dl.id, kind: "callback", redriven: true });
  const second = await hook.waitFor("the redriven callback", (d) => d.kind === "callback" && d.id === dl.id && d !== first);
  assert.equal(second.raw, first.raw, "the same callback body");
});

test("stats: a workflow's figures of the last hour, sixty points of the charts, a run's callback deliveries", async () => {
  // ct-cb (the test above) ended with a refused callback, redriven since
  const cbs = status(await api.GET("/v1/runs/{run_id}/callbacks", { params: { path: { run_id: "ct-cb" } } }), 200).data!;
  assert.equal(cbs.run_id, "ct-cb");
  assert.equal(cbs.callbacks.length, 1);
  assert.equal(cbs.callbacks[0].generation, 1);
  assert.ok(cbs.callbacks[0].attempts >= 1);
  error(await api.GET("/v1/runs/{run_id}/callbacks", { params: { path: { run_id: NOT_FOUND_RUN } } }), 404, "not_found");
  error(await api.GET("/v1/runs/{run_id}/callbacks", { params: { path: { run_id: BAD_ID } } }), 400, "invalid_argument");

  const s = status(await api.GET("/v1/workflows/{name}/stats", { params: { path: { name: WF_CB } } }), 200).data!;
  assert.equal(s.workflow, WF_CB);
  assert.ok(s.last_hour.succeeded >= 1, JSON.stringify(s));
  assert.ok(s.steps.attempts >= 1 && s.steps.p50_ms !== null, JSON.stringify(s.steps));
  assert.match(s.from, TIMESTAMP);
  error(await api.GET("/v1/workflows/{name}/stats", { params: { path: { name: "ct-no-such-workflow" } } }), 404, "not_found");
  error(await api.GET("/v1/workflows/{name}/stats", { params: { path: { name: "bad name!" } } }), 400, "invalid_argument");

  const all = status(await api.GET("/v1/stats/series"), 200).data!;
  assert.equal(all.points.length, 60);
  assert.equal(all.bucket_seconds, 60);
  assert.ok(all.points.some((p) => p.steps.attempts > 0), "the scenario's attempts are counted");
  const one = status(await api.GET("/v1/stats/series", { params: { query: { minutes: 1440, workflow: WF_CB } } }), 200).data!;
  assert.equal(one.workflow, WF_CB);
  assert.equal(one.bucket_seconds, 1440);
  assert.equal(one.points.reduce((n, p) => n + p.runs.succeeded, 0), s.last_hour.succeeded);
  for (const minutes of [4, 1441])
    assert.match(error(await api.GET("/v1/stats/series", { params: { query: { minutes } } }), 400, "invalid_argument"), /minutes/);
  assert.match(error(await api.GET("/v1/stats/series", { params: { query: { workflow: "bad name!" } } }), 400, "invalid_argument"), /workflow/);
});

// ---- long-running steps --------------------------------------------------------

const WF_ASYNC = "ct-async";

/** The run once its current step is pending (its webhook answered pending). */
async function pendingRun(runId: string, attempt = 1) {
  return until(`run ${runId} pending in attempt ${attempt}`, async () => {
    const run = await getRun(runId);
    return run.pending_since !== null && run.attempt === attempt ? run : undefined;
  });
}

/** POST .../steps/{step}/complete with delivery token `token` (none when undefined). */
function complete(runId: string, step: number, body: unknown, token?: string, init: BadBodyInit = {}) {
  const headers = { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(init.headers ?? {}) };
  return api.POST("/v1/runs/{run_id}/steps/{step}/complete", { params: { path: { run_id: runId, step } }, body: body as any, ...init, headers });
}

/** POST .../steps/{step}/heartbeat, as complete. */
function heartbeat(runId: string, step: number, token?: string, body?: unknown, init: BadBodyInit = {}) {
  const headers = { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(init.headers ?? {}) };
  return api.POST("/v1/runs/{run_id}/steps/{step}/heartbeat", { params: { path: { run_id: runId, step } }, body: body as any, ...init, headers });
}

test("long-running steps: pending, heartbeats, complete with run_at, then 409 already_completed; refusals change nothing", async () => {
  const wf = status(
    await api.PUT("/v1/workflows/{name}", {
      params: { path: { name: WF_ASYNC } },
      body: { url: hook.url("/step"), callback_url: hook.url("/callback/ok"), secret: hook.secret, retry_backoff: { base_ms: 20, max_ms: 200 }, max_pending_ms: 600000 },
    }),
    201,
  ).data!;
  assert.equal(wf.max_pending_ms, 600000);
  const id = "ct-async-1";
  const input = script(id, { do: "pending", timeout_ms: 31622400000, heartbeat_timeout_ms: 60000 }, succeed("done later"));
  await submit(id, input, {}, WF_ASYNC);
  const d0 = await hook.step(id, 0);
  assert.equal(d0.answered, 202);
  assert.equal(d0.body.last_heartbeat, undefined, "a first attempt hears no heartbeat");
  const tok = d0.body.memo.token;

  const run = await pendingRun(id);
  assert.equal(run.status, "running");
  assert.equal(run.next_attempt_at, null);
  const since = Date.parse(run.pending_since!);
  assert.equal(Date.parse(run.pending_timeout_at!) - since, 600000, "timeout_ms is clamped to max_pending_ms");
  assert.equal(Date.parse(run.heartbeat_timeout_at!) - since, 60000);
  const h0 = await history(id);
  assert.deepEqual(h0.map((s) => [s.step, s.attempt, s.result, s.finished_at, s.duration_ms, s.http_status, s.error, s.heartbeat]), [
    [0, 1, "pending", null, null, null, null, null],
  ]);
  assert.equal(h0[0].pending_since, run.pending_since);
  const m = status(await api.GET("/metrics", { parseAs: "text" }), 200);
  assert.match(m.data as string, /^hookflow_step_results_total\{result="pending"\} [1-9][0-9]*$/m);

  assert.deepEqual(status(await heartbeat(id, 0, tok, { details: { done: 1 } }), 200).data, { cancel_requested: false });
  const beat = await getRun(id);
  assert.ok(Date.parse(beat.heartbeat_timeout_at!) >= Date.parse(run.heartbeat_timeout_at!), "a heartbeat moves the deadline on");
  status(await heartbeat(id, 0, tok), 200); // no body: the details stay
  const hb = (await history(id))[0].heartbeat;
  assert.deepEqual(hb?.details, { done: 1 });
  assert.match(hb?.at ?? "", TIMESTAMP);

  // Refused, each changing nothing: no credential, another credential, another step, bad bodies.
  error(await heartbeat(id, 0), 401, "unauthenticated");
  error(await complete(id, 0, { outcome: "succeed" }), 401, "unauthenticated");
  assert.match(error(await heartbeat(id, 0, "not-a-delivery-token"), 403, "forbidden"), /delivery token/);
  assert.match(error(await complete(id, 0, { outcome: "succeed" }, "not-a-delivery-token"), 403, "forbidden"), /delivery token/);
  assert.match(error(await heartbeat(id, 1, tok), 403, "forbidden"), /step 0, not step 1/);
  assert.match(error(await complete(id, 1, { outcome: "succeed" }, tok), 403, "forbidden"), /step 0, not step 1/);
  const notAStep = "x" as unknown as number;
  assert.match(error(await heartbeat(id, notAStep, tok), 400, "invalid_argument"), /step/);
  assert.match(error(await complete(id, notAStep, { outcome: "succeed" }, tok), 400, "invalid_argument"), /step/);
  assert.match(error(await heartbeat(id, 0, tok, { details: "x".repeat(65 * 1024) }), 400, "invalid_argument"), /details/);
  assert.match(error(await heartbeat(id, 0, tok, { colour: 1 }), 400, "invalid_argument"), /colour/);
  assert.match(error(await complete(id, 0, { outcome: "pending" }, tok), 400, "invalid_argument"), /pending/);
  assert.match(error(await complete(id, 0, { outcome: "continue", delay_ms: 5, run_at: "2026-01-01T00:00:00Z" }, tok), 400, "invalid_argument"), /run_at/);
  assert.match(error(await complete(id, 0, { outcome: "continue", run_at: "tomorrow" }, tok), 400, "invalid_argument"), /run_at/);
  assert.match(error(await complete(id, 0, { error: { retryable: true } }, tok), 400, "invalid_argument"), /error\.message/);
  assert.match(error(await complete(id, 0, { error: { message: "x", colour: 1 } }, tok), 400, "invalid_argument"), /colour/);
  assert.match(error(await complete(id, 0, { outcome: "succeed", kv: { put: { "workflow/x": 1 } } }, tok), 400, "invalid_argument"), /kv/);
  await badBodies("POST complete", (init) => complete(id, 0, { outcome: "succeed" }, tok, init));
  await badBodies("POST heartbeat", (init) => heartbeat(id, 0, tok, { details: 1 }, init));
  const still = await getRun(id);
  assert.deepEqual([still.status, still.step, still.attempt, still.pending_since], ["running", 0, 1, run.pending_since], "nothing changed");

  // The completion settles the step like an answer: here continue, at a time already past (now).
  const next: Script = { t: id, s: input.s, from: 0 };
  const settled = status(await complete(id, 0, { outcome: "continue", payload: next, run_at: "2000-01-01T00:00:00Z" }, tok), 200).data!;
  assert.deepEqual([settled.status, settled.step, settled.attempt, settled.pending_since, settled.pending_timeout_at, settled.heartbeat_timeout_at], ["pending", 1, 0, null, null, null]);
  const done = await finished(id);
  assert.deepEqual([done.status, done.result], ["succeeded", "done later"]);
  const d1 = await hook.step(id, 1);
  assert.deepEqual(d1.body.payload, next);
  assert.equal(d1.body.last_heartbeat, undefined, "the next step hears no heartbeat");

  assert.match(error(await complete(id, 0, { outcome: "succeed" }, tok), 409, "already_completed"), /already completed/);
  error(await heartbeat(id, 0, tok), 409, "already_completed");
  const h = await history(id);
  assert.deepEqual(h.map((s) => [s.step, s.attempt, s.result, s.http_status, s.error]), [
    [0, 1, "continue", null, null],
    [1, 1, "succeed", 200, null],
  ]);
  assert.equal(h[0].pending_since, run.pending_since, "the settled attempt keeps when it went pending");
  assert.deepEqual(h[0].heartbeat?.details, { done: 1 });
  assert.ok(h[0].duration_ms !== null && h[0].finished_at !== null);
  assert.deepEqual([h[1].pending_since, h[1].heartbeat], [null, null]);
});

test("long-running steps: a missed heartbeat is retried with last_heartbeat; the old token is stale", async () => {
  const id = "ct-async-hb";
  await submit(id, script(id, { do: "byAttempt", list: [{ do: "pending", heartbeat_timeout_ms: 3000 }, succeed("second")] }), { max_attempts: 2 }, WF_ASYNC);
  const first = await hook.step(id, 0);
  const tok1 = first.body.memo.token;
  // Recorded whether the pending answer is settled yet or not.
  status(await heartbeat(id, 0, tok1, { details: { cursor: "p-7" } }), 200);
  const second = await hook.waitFor<StepDelivery>(
    "the retry of step 0",
    (d) => d.kind === "step" && d.body?.run_id === id && d.body?.attempt === 2,
    20000,
  );
  assert.deepEqual(second.body.last_heartbeat, { cursor: "p-7" });
  assert.equal(second.id, first.id, "a retry keeps the webhook-id");
  assert.notEqual(second.body.memo.token, tok1, "a new attempt, a new token");
  assert.equal((await finished(id)).result, "second");
  assert.match(error(await complete(id, 0, { outcome: "succeed" }, tok1), 409, "stale_attempt"), /no longer the current attempt/);
  error(await heartbeat(id, 0, tok1), 409, "stale_attempt");
  const h = await history(id);
  assert.deepEqual(h.map((s) => [s.attempt, s.result, s.error, s.http_status]), [
    [1, "transient_error", "heartbeat timeout", null],
    [2, "succeed", null, 200],
  ]);
  assert.deepEqual(h[0].heartbeat?.details, { cursor: "p-7" });
  assert.ok(h[0].pending_since !== null);
});

test("long-running steps: completion errors (retryable by default), a pending timeout dead-letters the last attempt", async () => {
  const id = "ct-async-err";
  await submit(id, script(id, { do: "pending" }), { max_attempts: 2 }, WF_ASYNC);
  const tok1 = (await hook.step(id, 0)).body.memo.token;
  await pendingRun(id, 1);
  const retried = status(await complete(id, 0, { error: { message: "export busy" } }, tok1), 200).data!;
  assert.deepEqual([retried.status, retried.step, retried.attempt, retried.error], ["scheduled", 0, 1, null]);
  const second = await hook.waitFor<StepDelivery>("attempt 2", (d) => d.kind === "step" && d.body?.run_id === id && d.body?.attempt === 2);
  await pendingRun(id, 2);
  const failed = status(await complete(id, 0, { error: { message: "order gone", retryable: false } }, second.body.memo.token), 200).data!;
  assert.deepEqual([failed.status, failed.error, failed.error_kind], ["failed", "order gone", "permanent"]);
  assert.deepEqual((await history(id)).map((s) => [s.attempt, s.result, s.error, s.http_status]), [
    [1, "transient_error", "export busy", null],
    [2, "permanent_error", "order gone", null],
  ]);

  const to = "ct-async-timeout";
  await submit(to, script(to, { do: "pending", timeout_ms: 200 }), { max_attempts: 1 }, WF_ASYNC);
  const f = await finished(to);
  assert.deepEqual([f.status, f.error, f.error_kind, f.pending_since], ["failed", "pending timeout", "transient", null]);
  const dl = status(await api.GET("/v1/dead-letters", { params: { query: { workflow: WF_ASYNC, kind: "step" } } }), 200).data!;
  const dead = dl.dead_letters.find((x) => x.run_id === to);
  assert.ok(dead, `a dead letter for ${to}: ${JSON.stringify(dl)}`);
  assert.deepEqual([dead.last_error, dead.last_http_status, dead.attempts], ["pending timeout", null, 1]);
  assert.ok(dl.dead_letters.some((x) => x.run_id === id && x.last_error === "order gone"));
});

test("long-running steps: cancel ends a pending step at once; then complete is 409 run_cancelled, heartbeat says stop", async () => {
  const id = "ct-async-cancel";
  await submit(id, script(id, { do: "pending" }), {}, WF_ASYNC);
  const tok = (await hook.step(id, 0)).body.memo.token;
  await pendingRun(id);
  const c = status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: id } } }), 200).data!;
  assert.deepEqual([c.status, c.cancel_requested, c.pending_since, c.error], ["cancelled", true, null, null]);
  assert.equal((await hook.callback(id)).body.status, "cancelled");
  assert.match(error(await complete(id, 0, { outcome: "succeed" }, tok), 409, "run_cancelled"), /cancelled/);
  assert.deepEqual(status(await heartbeat(id, 0, tok), 200).data, { cancel_requested: true });
  const h = await history(id);
  assert.deepEqual(h.map((s) => [s.attempt, s.result]), [[1, "cancelled"]]);
  assert.ok(h[0].pending_since !== null);

  // A token outlives its run: once the run is gone (its group forgotten), 404.
  const G = "ct-async-g";
  status(await api.PUT("/v1/groups/{group_id}", { params: { path: { group_id: G } }, body: { workflow: WF_ASYNC, members: [{ key: "a", input: script("ga", { do: "pending" }) }] } }), 201);
  const rid = sha256hex(`${G}/a`);
  const gtok = (await hook.step(rid, 0)).body.memo.token;
  await pendingRun(rid);
  assert.deepEqual(status(await api.POST("/v1/groups/{group_id}/cancel", { params: { path: { group_id: G } } }), 200).data, { cancelled: 1 });
  status(await api.DELETE("/v1/groups/{group_id}", { params: { path: { group_id: G } } }), 204);
  error(await complete(rid, 0, { outcome: "succeed" }, gtok), 404, "not_found");
  error(await heartbeat(rid, 0, gtok), 404, "not_found");
});

test("continue with run_at: the next step is scheduled at that time", async () => {
  const at = new Date(Date.now() + 3600000).toISOString();
  await submit("ct-runat", script("runat", cont({ run_at: at }), succeed()), {}, WF_ASYNC);
  const s = await runWithStatus("ct-runat", "scheduled");
  assert.deepEqual([s.step, s.next_attempt_at], [1, at]);
  status(await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: "ct-runat" } } }), 200);
});

// ---- schedules -------------------------------------------------------------------

const WF_SCHED = "ct-sched-wf";
const SCHED = "ct-sched";

/** A schedule without its next fire times (as lists show it). */
function withoutNext(s: { next_fire_times?: string[] }): Record<string, unknown> {
  const c: Record<string, unknown> = { ...s };
  delete c.next_fire_times;
  return c;
}

/** The run ids of a schedule's recent runs, sorted (their statuses move on). */
const runIds = (s: { recent_runs: { run_id: string }[] }) => s.recent_runs.map((r) => r.run_id).sort();

/** The run id of schedule `id`'s fire time `t` (RFC 3339 UTC): `<id>-YYYYMMDDTHHMMSSZ`. */
const fireRunId = (id: string, t: string) => `${id}-${t.replace(/[-:]/g, "").replace(/\.000Z$/, "Z")}`;

test("schedules: create, read, trigger, backfill across DST, replace, pause, resume, list, delete; bad input changes nothing", async () => {
  status(await api.PUT("/v1/workflows/{name}", { params: { path: { name: WF_SCHED } }, body: { url: hook.url("/step"), secret: hook.secret } }), 201);
  const at = (id: string) => ({ params: { path: { schedule_id: id } } });
  const put = (id: string, body: unknown) => api.PUT("/v1/schedules/{schedule_id}", { ...at(id), body: body as any });
  const get = async (id: string) => status(await api.GET("/v1/schedules/{schedule_id}", at(id)), 200).data!;
  const trigger = (id: string) => api.POST("/v1/schedules/{schedule_id}/trigger", at(id));
  const backfill = (body: unknown, id = SCHED) => api.POST("/v1/schedules/{schedule_id}/backfill", { ...at(id), body: body as any });
  // Every run of the schedule stays active (step 0 continues much later), so
  // that the overlap policies meet an active run.
  const input = script(SCHED, cont({ delay_ms: LONG }), succeed());
  const body = { workflow: WF_SCHED, cron: "30 2 * * *", timezone: "Europe/Paris", input, headers: { tenant: "acme" }, priority: 5, paused: true };

  // Created paused: it fires nothing by itself during the test, and still lists its next fire times.
  const created = status(await put(SCHED, { ...body, note: "created paused" }), 201).data!;
  assert.deepEqual(
    [created.id, created.workflow, created.cron, created.every_ms, created.timezone, created.input, created.headers, created.priority, created.max_attempts, created.concurrency_key],
    [SCHED, WF_SCHED, "30 2 * * *", null, "Europe/Paris", input, { tenant: "acme" }, 5, null, null],
  );
  assert.deepEqual(
    [created.overlap, created.catchup_window_ms, created.jitter_ms, created.start_at, created.end_at, created.paused, created.note],
    ["skip", 60000, 0, null, null, true, "created paused"],
    "defaults are filled in",
  );
  assert.deepEqual([created.fired, created.skipped, created.missed, created.buffered, created.recent_runs], [0, 0, 0, 0, []]);
  assert.equal(created.next_fire_times.length, 10);
  assert.ok(created.next_fire_time !== null && TIMESTAMP.test(created.next_fire_time));
  // 02:30 in Paris is 01:30Z in winter and 00:30Z in summer; one a day, in order.
  for (const [i, t] of created.next_fire_times.entries()) {
    assert.match(t, /^[0-9-]{10}T0[01]:30:00\.000Z$/);
    if (i > 0) assert.ok(Date.parse(t) > Date.parse(created.next_fire_times[i - 1]));
  }
  assert.deepEqual(withoutNext(await get(SCHED)), withoutNext(created), "GET shows what PUT answered");

  // Trigger: one run now, paused or not; the next one meets it under skip.
  const t1 = status(await trigger(SCHED), 200).data!;
  assert.equal(t1.outcome, "started");
  assert.ok(t1.run_id !== null, "a started trigger names its run");
  assert.match(t1.run_id, /^ct-sched-trigger-[0-9A-HJKMNP-TV-Z]{26}$/);
  const tr = await getRun(t1.run_id);
  assert.deepEqual([tr.schedule, tr.workflow, tr.input, tr.headers, tr.priority], [{ id: SCHED, fire_time: null }, WF_SCHED, input, { tenant: "acme" }, 5]);
  const t2 = status(await trigger(SCHED), 200).data!;
  assert.equal(t2.outcome, "skipped", "overlap skip: a run of the schedule is active");
  assert.equal(t2.run_id, null, "a skipped trigger started no run");

  // Backfill across the spring change in Paris (2026-03-29: 02:00 -> 03:00,
  // so 02:30 does not exist and fires once at 03:00 CEST, 01:00Z); allow_all
  // by default: every fire time starts a run although runs are active.
  const spring = ["2026-03-28T01:30:00.000Z", "2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z", "2026-03-31T00:30:00.000Z"];
  assert.deepEqual(status(await backfill({ from: "2026-03-28T00:00:00Z", to: "2026-04-01T00:00:00Z" }), 200).data, { fire_times: 4, started: 4, skipped: 0, buffered: 0 });
  for (const t of spring) {
    const run = await getRun(fireRunId(SCHED, t));
    assert.deepEqual([run.schedule, run.workflow, run.input, run.priority], [{ id: SCHED, fire_time: t }, WF_SCHED, input, 5]);
  }
  // Across the autumn change (2026-10-25: 03:00 -> 02:00, 02:30 twice: one
  // fire time), under buffer_one: the first waits, the other two are skipped.
  assert.deepEqual(
    status(await backfill({ from: "2026-10-24T00:00:00Z", to: "2026-10-27T00:00:00Z", overlap: "buffer_one" }), 200).data,
    { fire_times: 3, started: 0, skipped: 2, buffered: 1 },
  );
  const s1 = await get(SCHED);
  assert.deepEqual([s1.fired, s1.skipped, s1.missed, s1.buffered], [5, 3, 0, 1]);
  const recent = new Map(s1.recent_runs.map((r) => [r.run_id, r.fire_time] as const));
  assert.deepEqual([...recent.keys()].sort(), [t1.run_id, ...spring.map((t) => fireRunId(SCHED, t))].sort());
  assert.equal(recent.get(t1.run_id), null, "a trigger's run has no fire time");
  for (const t of spring) assert.equal(recent.get(fireRunId(SCHED, t)), t);
  // The same range again: the same fire times, whose runs exist: no second run.
  assert.equal(status(await backfill({ from: "2026-03-28T00:00:00Z", to: "2026-04-01T00:00:00Z" }), 200).data!.fire_times, 4);
  assert.deepEqual(runIds(await get(SCHED)), [...recent.keys()].sort(), "one run per fire time");

  assert.match(error(await backfill({ from: "2020-01-01T00:00:00Z", to: "2026-01-01T00:00:00Z" }), 400, "invalid_argument"), /^to: more than 1000 fire times/);
  assert.match(error(await backfill({ from: "2026-01-02T00:00:00Z", to: "2026-01-01T00:00:00Z" }), 400, "invalid_argument"), /^to: must be after from/);
  assert.match(error(await backfill({ from: "2026-01-01T00:00:00Z" }), 400, "invalid_argument"), /^to: is required/);
  assert.match(error(await backfill({ from: "yesterday", to: "2026-01-01T00:00:00Z" }), 400, "invalid_argument"), /^from: /);
  assert.match(error(await backfill({ from: "2026-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z", overlap: "queue" }), 400, "invalid_argument"), /^overlap: /);
  assert.match(error(await backfill({ from: "2026-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z", colour: 1 }), 400, "invalid_argument"), /colour/);
  error(await backfill({ from: "2026-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z" }, "ct-nope"), 404, "not_found");
  await badBodies("POST backfill", (init) =>
    api.POST("/v1/schedules/{schedule_id}/backfill", { ...at(SCHED), body: { from: "2026-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z" }, ...init }),
  );
  error(await trigger("ct-nope"), 404, "not_found");
  error(await trigger(BAD_ID), 400, "invalid_argument");

  // Replaced with a window in 2031: the fire times are known, the spring
  // change included (2031-03-30: 02:30 fires at 03:00 CEST, 01:00Z), and cut
  // by end_at. Counts, runs and the buffered fire are kept; the note and
  // every setting not given go back to their defaults.
  const before = await get(SCHED);
  const replaced = status(await put(SCHED, { ...body, start_at: "2031-03-28T00:00:00Z", end_at: "2031-04-01T00:00:00Z" }), 200).data!;
  assert.deepEqual(replaced.next_fire_times, ["2031-03-28T01:30:00.000Z", "2031-03-29T01:30:00.000Z", "2031-03-30T01:00:00.000Z", "2031-03-31T00:30:00.000Z"]);
  assert.deepEqual(
    [replaced.next_fire_time, replaced.start_at, replaced.end_at, replaced.note, replaced.paused, replaced.created_at],
    ["2031-03-28T01:30:00.000Z", "2031-03-28T00:00:00.000Z", "2031-04-01T00:00:00.000Z", null, true, created.created_at],
  );
  assert.deepEqual(
    [replaced.fired, replaced.skipped, replaced.missed, replaced.buffered, runIds(replaced)],
    [before.fired, before.skipped, 0, 1, runIds(before)],
  );

  // Pause and resume, each with an optional note. Resumed, it waits for 2031.
  const pr = (op: "pause" | "resume", id: string, b?: unknown, init: BadBodyInit = {}) =>
    op === "pause"
      ? api.POST("/v1/schedules/{schedule_id}/pause", { ...at(id), body: b as any, ...init })
      : api.POST("/v1/schedules/{schedule_id}/resume", { ...at(id), body: b as any, ...init });
  const resumed = status(await pr("resume", SCHED, {}), 200).data!;
  assert.deepEqual([resumed.paused, resumed.note, resumed.next_fire_time], [false, null, "2031-03-28T01:30:00.000Z"]);
  const paused = status(await pr("pause", SCHED, { note: "maintenance" }), 200).data!;
  assert.deepEqual([paused.paused, paused.note, paused.next_fire_times.length], [true, "maintenance", 4]);
  const again = status(await pr("pause", SCHED), 200).data!;
  assert.deepEqual([again.paused, again.note], [true, "maintenance"], "pausing again changes nothing; no note keeps the note");
  const back = status(await pr("resume", SCHED, { note: "back" }), 200).data!;
  assert.deepEqual([back.paused, back.note, back.next_fire_time], [false, "back", "2031-03-28T01:30:00.000Z"]);
  for (const op of ["pause", "resume"] as const) {
    assert.match(error(await pr(op, SCHED, { colour: 1 }), 400, "invalid_argument"), /colour/);
    assert.match(error(await pr(op, SCHED, { note: "x".repeat(1025) }), 400, "invalid_argument"), /^note: /);
    error(await pr(op, "ct-nope"), 404, "not_found");
    error(await pr(op, BAD_ID), 400, "invalid_argument");
    await badBodies(`POST ${op}`, (init) => pr(op, SCHED, { note: "x" }, init));
  }
  assert.deepEqual([(await get(SCHED)).paused, (await get(SCHED)).note], [false, "back"], "refused requests changed nothing");

  // every_ms: anchored at start_at, else at the epoch; in UTC.
  const every = status(await put("ct-sched-every", { workflow: WF_SCHED, every_ms: 5400000, start_at: "2031-01-01T00:00:00Z", overlap: "buffer_all", input }), 201).data!;
  assert.deepEqual([every.cron, every.every_ms, every.timezone, every.overlap, every.paused], [null, 5400000, "UTC", "buffer_all", false]);
  assert.deepEqual(every.next_fire_times.slice(0, 3), ["2031-01-01T00:00:00.000Z", "2031-01-01T01:30:00.000Z", "2031-01-01T03:00:00.000Z"]);
  const epoch = status(await put("ct-sched-epoch", { workflow: WF_SCHED, every_ms: 5400000, paused: true }), 201).data!;
  assert.equal(epoch.next_fire_times.length, 10);
  for (const t of epoch.next_fire_times) assert.equal(Date.parse(t) % 5400000, 0, `${t}: a whole number of intervals after 1970-01-01`);

  // Bad input: 400 naming the field (and for cron, the position); nothing is created.
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ cron: "0 24 * * *" }, /^cron: hour field at position 3: 24 is out of range 0-23$/],
    [{ cron: "0 9 * *" }, /^cron: expected 5 fields, found 4$/],
    [{ cron: "0 9 * * MON-FRX" }, /^cron: day-of-week field at position 13: /],
    [{ cron: "*/0 * * * *" }, /^cron: minute field at position 3: /],
    [{ cron: "@every" }, /^cron: unknown macro "@every" at position 1/],
    [{ cron: "0 0 30 2 *" }, /^cron: never fires/],
    [{ timezone: "Mars/Base" }, /^timezone: unknown zone "Mars\/Base"$/],
    [{ timezone: "../etc/passwd" }, /^timezone: /],
    [{ workflow: "ct-nope" }, /^workflow: /],
    [{ every_ms: 60000 }, /^cron: exactly one of cron and every_ms/],
    [{ cron: undefined }, /^cron: exactly one of cron and every_ms/],
    [{ cron: undefined, every_ms: 999 }, /^every_ms: /],
    [{ cron: undefined, every_ms: 60000, timezone: "UTC" }, /^timezone: only with cron/],
    [{ overlap: "queue" }, /^overlap: /],
    [{ jitter_ms: 86400001 }, /^jitter_ms: /],
    [{ catchup_window_ms: -1 }, /^catchup_window_ms: /],
    [{ priority: -1 }, /^priority: /],
    [{ max_attempts: 0 }, /^max_attempts: /],
    [{ concurrency_key: "" }, /^concurrency_key: /],
    [{ headers: { "workflow.x": "1" } }, /^headers/],
    [{ start_at: "tomorrow" }, /^start_at: /],
    [{ start_at: "2027-01-01T00:00:00Z", end_at: "2026-01-01T00:00:00Z" }, /^end_at: must be after start_at/],
    [{ note: "x".repeat(1025) }, /^note: /],
    [{ colour: "red" }, /colour/],
  ];
  for (const [b, re] of bad)
    assert.match(error(await put("ct-sched-bad", { workflow: WF_SCHED, cron: "@hourly", ...b }), 400, "invalid_argument"), re, JSON.stringify(b));
  assert.match(error(await put("ct-sched-bad", { cron: "@hourly" }), 400, "invalid_argument"), /^workflow: is required/);
  assert.match(error(await put(BAD_ID, { workflow: WF_SCHED, cron: "@hourly" }), 400, "invalid_argument"), /^id: /);
  assert.match(error(await put("x".repeat(65), { workflow: WF_SCHED, cron: "@hourly" }), 400, "invalid_argument"), /^id: /);
  await badBodies("PUT schedule", (init) => api.PUT("/v1/schedules/{schedule_id}", { ...at("ct-sched-bad"), body: { workflow: WF_SCHED, cron: "@hourly" }, ...init }));
  error(await api.GET("/v1/schedules/{schedule_id}", at("ct-sched-bad")), 404, "not_found");
  error(await api.GET("/v1/schedules/{schedule_id}", at(BAD_ID)), 400, "invalid_argument");

  // The list: by id, paged, without next_fire_times.
  const ids = [SCHED, "ct-sched-epoch", "ct-sched-every"];
  const l1 = status(await api.GET("/v1/schedules", { params: { query: { limit: 1 } } }), 200).data!;
  assert.deepEqual(l1.schedules.map((s) => s.id), [ids[0]]);
  assert.ok(l1.next_cursor, "a first page of one has a next cursor");
  assert.ok(!("next_fire_times" in l1.schedules[0]));
  const listed = { ...l1.schedules[0], recent_runs: runIds(l1.schedules[0]) };
  const read = await get(SCHED);
  assert.deepEqual(listed, { ...withoutNext(read), recent_runs: runIds(read) }, "a listed schedule is the schedule without next_fire_times");
  const l2 = status(await api.GET("/v1/schedules", { params: { query: { limit: 1, cursor: l1.next_cursor! } } }), 200).data!;
  assert.deepEqual(l2.schedules.map((s) => s.id), [ids[1]]);
  const all = status(await api.GET("/v1/schedules"), 200).data!;
  assert.deepEqual([all.schedules.map((s) => s.id), all.next_cursor], [ids, null]);
  error(await api.GET("/v1/schedules", { params: { query: { limit: 0 } } }), 400, "invalid_argument");
  error(await api.GET("/v1/schedules", { params: { query: { cursor: "%%%" } } }), 400, "invalid_argument");

  // A workflow a schedule names cannot be deleted.
  assert.match(error(await api.DELETE("/v1/workflows/{name}", { params: { path: { name: WF_SCHED } } }), 409, "workflow_in_use"), new RegExp(WF_SCHED));
  const m = status(await api.GET("/metrics", { parseAs: "text" }), 200).data as string;
  for (const c of ["fires", "skips", "misses"]) assert.match(m, new RegExp(`^hookflow_schedule_${c}_total [0-9]+$`, "m"));

  // Delete: the schedules go, their runs stay (and name them).
  for (const id of ids) status(await api.DELETE("/v1/schedules/{schedule_id}", at(id)), 204);
  error(await api.DELETE("/v1/schedules/{schedule_id}", at(SCHED)), 404, "not_found");
  error(await api.DELETE("/v1/schedules/{schedule_id}", at(BAD_ID)), 400, "invalid_argument");
  error(await api.GET("/v1/schedules/{schedule_id}", at(SCHED)), 404, "not_found");
  assert.deepEqual((await getRun(fireRunId(SCHED, spring[0]))).schedule, { id: SCHED, fire_time: spring[0] }, "a run outlives its schedule");
  assert.deepEqual(status(await api.GET("/v1/schedules"), 200).data, { schedules: [], next_cursor: null });
  // The runs were the trigger's and the four backfilled ones (the buffered fire went with its schedule).
  assert.deepEqual(status(await api.POST("/v1/runs:cancel", { body: { workflow: WF_SCHED } }), 200).data, { cancelled: 5 });
});

test("webhook: every step and callback request verified (standardwebhooks) and valid against the spec", () => {
  const steps = hook.deliveries.filter((d) => d.kind === "step").length;
  const callbacks = hook.deliveries.filter((d) => d.kind === "callback").length;
  assert.ok(steps >= 20, `steps received: ${steps}`);
  assert.ok(callbacks >= 10, `callbacks received: ${callbacks}`);
  assert.deepEqual(hook.failures, [], "webhook verification failures");
  assert.deepEqual(rec.violations, [], "answers that contradict the spec");
  console.log(`# webhook: ${steps} step and ${callbacks} callback requests verified; ${rec.count} API answers checked`);
});
