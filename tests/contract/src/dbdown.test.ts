// With the database stopped under a running service: /readyz answers 503,
// /healthz and /metrics still answer, and every /v1 operation answers 503
// `unavailable` (each request is well-formed, so only the database can fail it),
// but GET /v1/whoami and GET /v1/endpoints, which read no database. The
// operations of a step attempt are sent with the delivery token of the auth
// phase's pending sample run (the token is checked without the database).
import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import { loadEnv, makeClient, Recorder } from "./client";
import { Contract } from "./contract";
import { ATTEMPT_OPERATIONS, sampleAttemptTokenFile, sendSample } from "./samples";
import { until } from "./util";

const env = loadEnv();
const contract = new Contract(env.specJson);
const rec = new Recorder(contract, env.obsFile, "dbdown");
const api = makeClient(env, rec, env.token);

test("readyz 503, healthz 200, metrics 200 with hookflow_up 0", async () => {
  // The database was stopped just before this phase; the first probe may race its shutdown.
  await until("readyz 503", async () => ((await sendSample(api, "GET /readyz")).status === 503 ? true : undefined), 10000);
  assert.equal((await sendSample(api, "GET /healthz")).status, 200);
  const m = await sendSample(api, "GET /metrics");
  assert.equal(m.status, 200);
  assert.match(m.body as string, /^hookflow_up 0$/m);
});

test("every /v1 operation answers 503 unavailable", async () => {
  // GET /v1/whoami and GET /v1/endpoints (this instance's table) read no
  // database: they still answer.
  const local = ["/v1/whoami", "/v1/endpoints"];
  for (const path of local) assert.equal((await sendSample(api, `GET ${path}`)).status, 200, path);
  const ops = contract.operations().filter((o) => o.path.startsWith("/v1/") && !local.includes(o.path));
  const attemptToken = fs.readFileSync(sampleAttemptTokenFile(env), "utf8").trim();
  for (const { method, path } of ops) {
    const key = `${method} ${path}`;
    const r = await sendSample(api, key, ATTEMPT_OPERATIONS.has(key) ? { Authorization: `Bearer ${attemptToken}` } : undefined);
    assert.equal(r.status, 503, `${key}: ${JSON.stringify(r.body)}`);
    assert.equal((r.body as any).error.code, "unavailable", key);
  }
  assert.deepEqual(rec.violations, []);
});
