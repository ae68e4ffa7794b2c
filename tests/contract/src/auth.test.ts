// With HOOKFLOW_API_TOKENS set: public endpoints stay open, every /v1
// operation answers 401 without a valid bearer token, a read token may only
// GET (403 on every other operation), the admin token opens everything but
// the operations of a step attempt, and a run's delivery token opens the
// memo of that run only, and complete and heartbeat of its own attempt.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, test } from "node:test";
import { loadEnv, makeClient, Recorder } from "./client";
import { Contract } from "./contract";
import { HookServer, newSecret, script } from "./hooks";
import { ATTEMPT_OPERATIONS, sampleAttemptTokenFile, sendSample } from "./samples";
import { error, status, until } from "./util";

const env = loadEnv();
if (!env.token) throw new Error("HF_API_TOKEN is required for the auth phase");
const contract = new Contract(env.specJson);
const rec = new Recorder(contract, env.obsFile, "auth");
const api = makeClient(env, rec, env.token);
const anon = makeClient(env, rec);
const hook = new HookServer(contract, newSecret());

before(() => hook.start());
after(async () => {
  await hook.stop();
  // Requests that arrived after the last test (late callbacks) were verified too.
  if (hook.failures.length) throw new Error(`webhook verification failures:\n${hook.failures.join("\n")}`);
});

test("public endpoints need no token", async () => {
  for (const key of ["GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.yaml", "GET /"]) {
    const r = await sendSample(anon, key);
    assert.equal(r.status, 200, key);
  }
});

test("every /v1 operation answers 401 without a token or with a wrong one", async () => {
  const ops = contract.operations().filter((o) => o.path.startsWith("/v1/"));
  assert.ok(ops.length > 25);
  for (const { method, path } of ops) {
    const key = `${method} ${path}`;
    const r = await sendSample(anon, key);
    assert.equal(r.status, 401, `${key} without a token: ${JSON.stringify(r.body)}`);
    assert.equal((r.body as any).error.code, "unauthenticated", key);
    assert.equal(r.response.headers.get("www-authenticate"), "Bearer", key);
    const w = await sendSample(anon, key, { Authorization: "Bearer not-a-valid-token-at-all" });
    // A credential the memo and step-attempt operations do not accept is a
    // wrong delivery token to them: 403.
    assert.equal(w.status, path.includes("/memo/") || ATTEMPT_OPERATIONS.has(key) ? 403 : 401, `${key} with a wrong token`);
  }
});

test("a read token reads and every other operation answers 403", async () => {
  if (!env.readToken) throw new Error("HF_READ_TOKEN is required for the auth phase");
  const reader = makeClient(env, rec, env.readToken);
  assert.deepEqual(status(await reader.GET("/v1/whoami"), 200).data, { scope: "read", token_required: true });
  assert.deepEqual(status(await api.GET("/v1/whoami"), 200).data, { scope: "admin", token_required: true });
  const ops = contract.operations().filter((o) => o.path.startsWith("/v1/"));
  for (const { method, path } of ops) {
    const key = `${method} ${path}`;
    const r = await sendSample(reader, key);
    if (method === "GET") {
      assert.ok(r.status !== 401 && r.status !== 403, `${key} with a read token: ${r.status} ${JSON.stringify(r.body)}`);
    } else {
      assert.equal(r.status, 403, `${key} with a read token: ${JSON.stringify(r.body)}`);
      assert.equal((r.body as any).error.code, "forbidden", key);
      // No API token opens the operations of a step attempt, whatever its scope.
      assert.match((r.body as any).error.message, ATTEMPT_OPERATIONS.has(key) ? /only the delivery token/ : /scope read/, key);
    }
  }
  assert.deepEqual(rec.violations, [], "answers that contradict the spec");
});

test("the API token opens the API; a delivery token opens its own run's memo only", async () => {
  status(
    await api.PUT("/v1/workflows/{name}", {
      params: { path: { name: "ct-auth" } },
      body: { url: hook.url("/step"), secret: hook.secret },
    }),
    201,
  );
  // Step 0 continues an hour later: the runs stay active, so their delivery
  // tokens stay valid (a token stops working when its run ends).
  for (const id of ["ct-auth-1", "ct-auth-2"])
    status(
      await api.POST("/v1/runs", {
        body: { workflow: "ct-auth", run_id: id, input: script(id, { do: "continue", delay_ms: 3600000 }, { do: "succeed" }) },
      }),
      201,
    );
  const tok1 = (await hook.step("ct-auth-1", 0)).body.memo.token;
  const tok2 = (await hook.step("ct-auth-2", 0)).body.memo.token;
  const run1 = { path: { run_id: "ct-auth-1", key: "m" } };
  status(await api.PUT("/v1/runs/{run_id}/memo/{key}", { params: run1, body: { value: 1 }, headers: { Authorization: `Bearer ${tok1}` } }), 200);
  assert.deepEqual(status(await anon.GET("/v1/runs/{run_id}/memo/{key}", { params: run1, headers: { Authorization: `Bearer ${tok1}` } }), 200).data, { value: 1 });
  assert.deepEqual(status(await api.GET("/v1/runs/{run_id}/memo/{key}", { params: run1 }), 200).data, { value: 1 });
  error(await anon.GET("/v1/runs/{run_id}/memo/{key}", { params: run1, headers: { Authorization: `Bearer ${tok2}` } }), 403, "forbidden");
  error(await anon.GET("/v1/runs/{run_id}/memo/{key}", { params: run1 }), 401, "unauthenticated");
  // The delivery token is no API token.
  error(await anon.GET("/v1/runs/{run_id}", { params: { path: { run_id: "ct-auth-1" } }, headers: { Authorization: `Bearer ${tok1}` } }), 401, "unauthenticated");
  // Once its run ends, the token opens nothing.
  // (200 once step 0 has settled, 202 if it is still being settled.)
  for (const id of ["ct-auth-1", "ct-auth-2"]) {
    const c = await api.POST("/v1/runs/{run_id}/cancel", { params: { path: { run_id: id } } });
    assert.ok([200, 202].includes(c.response.status), `cancel ${id}: ${c.response.status}`);
  }
  const ended = status(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: "ct-auth-1" }, query: { wait_ms: 20000 } } }), 200).data!;
  assert.equal(ended.status, "cancelled");
  error(await anon.GET("/v1/runs/{run_id}/memo/{key}", { params: run1, headers: { Authorization: `Bearer ${tok1}` } }), 403, "forbidden");
  assert.deepEqual(hook.failures, [], "webhook verification failures");
  assert.deepEqual(rec.violations, [], "answers that contradict the spec");
});

test("complete and heartbeat take the attempt's delivery token only, never an API token", async () => {
  // ct-sample-run is the run of samples.ts: its step 0 answers pending and
  // stays pending, so the dbdown phase can send the samples of these two
  // operations with its token (written to sampleAttemptTokenFile).
  const id = "ct-sample-run";
  status(await api.POST("/v1/runs", { body: { workflow: "ct-auth", run_id: id, input: script(id, { do: "pending" }) } }), 201);
  const token = (await hook.step(id, 0)).body.memo.token;
  await until(`${id} pending`, async () => {
    const run = status(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: id } } }), 200).data!;
    return run.pending_since !== null ? run : undefined;
  });
  if (!env.readToken) throw new Error("HF_READ_TOKEN is required for the auth phase");
  const reader = makeClient(env, rec, env.readToken);
  const p = { path: { run_id: id, step: 0 } };
  for (const who of [api, reader]) {
    assert.match(error(await who.POST("/v1/runs/{run_id}/steps/{step}/heartbeat", { params: p }), 403, "forbidden"), /only the delivery token/);
    assert.match(
      error(await who.POST("/v1/runs/{run_id}/steps/{step}/complete", { params: p, body: { outcome: "succeed" } }), 403, "forbidden"),
      /only the delivery token/,
    );
  }
  error(await anon.POST("/v1/runs/{run_id}/steps/{step}/heartbeat", { params: p }), 401, "unauthenticated");
  const asStep = { Authorization: `Bearer ${token}` };
  assert.deepEqual(status(await anon.POST("/v1/runs/{run_id}/steps/{step}/heartbeat", { params: p, headers: asStep }), 200).data, { cancel_requested: false });
  // The delivery token is no API token, even for the run it names.
  error(await anon.GET("/v1/runs/{run_id}", { params: { path: { run_id: id } }, headers: asStep }), 401, "unauthenticated");
  const run = status(await api.GET("/v1/runs/{run_id}", { params: { path: { run_id: id } } }), 200).data!;
  assert.equal(run.status, "running", "the API token's refused completion changed nothing");
  fs.writeFileSync(sampleAttemptTokenFile(env), token);
  assert.deepEqual(hook.failures, [], "webhook verification failures");
  assert.deepEqual(rec.violations, [], "answers that contradict the spec");
});
