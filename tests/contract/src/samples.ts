// One well-formed request per operation of the spec, for the sweeps that
// expect the same answer from every operation (401 without a token, 503
// without a database). Each request passes the handler's own validation, so
// the answer can only come from authentication or the database. (The two
// operations of a step attempt take only its delivery token: the auth phase
// makes step 0 of ct-sample-run pending and saves its token for the dbdown
// sweep: sampleAttemptTokenFile.)
import path from "node:path";
import { Api, Env } from "./client";

export interface Sample {
  params?: { path?: Record<string, unknown>; query?: Record<string, unknown> };
  body?: unknown;
  parseAs?: "json" | "text";
}

export const SAMPLES: Record<string, Sample> = {
  "GET /healthz": {},
  "GET /readyz": {},
  "GET /metrics": { parseAs: "text" },
  "GET /openapi.yaml": { parseAs: "text" },
  "GET /": { parseAs: "text" },
  "GET /v1/whoami": {},
  "GET /v1/endpoints": {},
  "GET /v1/workflows": { params: { query: { limit: 5 } } },
  "PUT /v1/workflows/{name}": {
    params: { path: { name: "ct-sample" } },
    body: { url: "http://127.0.0.1:9/steps" },
  },
  "GET /v1/workflows/{name}": { params: { path: { name: "ct-sample" } } },
  "DELETE /v1/workflows/{name}": { params: { path: { name: "ct-sample" } } },
  "POST /v1/workflows/{name}/secret": { params: { path: { name: "ct-sample" } }, body: { grace_ms: 0 } },
  "POST /v1/workflows/{name}/pause": { params: { path: { name: "ct-sample" } } },
  "POST /v1/workflows/{name}/resume": { params: { path: { name: "ct-sample" } }, body: {} },
  "GET /v1/workflows/{name}/stats": { params: { path: { name: "ct-sample" } } },
  "GET /v1/stats/series": { params: { query: { minutes: 60, workflow: "ct-sample" } } },
  "POST /v1/runs": { body: { workflow: "ct-sample", run_id: "ct-sample-run", input: { n: 1 }, concurrency_key: "ct-k" } },
  "GET /v1/runs": { params: { query: { workflow: "ct-sample", status: "pending,failed", concurrency_key: "ct-k", limit: 5 } } },
  "GET /v1/runs/{run_id}": { params: { path: { run_id: "ct-sample-run" } } },
  "GET /v1/runs/{run_id}/steps": { params: { path: { run_id: "ct-sample-run" } } },
  "GET /v1/runs/{run_id}/children": { params: { path: { run_id: "ct-sample-run" }, query: { limit: 5 } } },
  "GET /v1/runs/{run_id}/callbacks": { params: { path: { run_id: "ct-sample-run" } } },
  "POST /v1/runs/{run_id}/cancel": { params: { path: { run_id: "ct-sample-run" } } },
  "POST /v1/runs/{run_id}/rerun": { params: { path: { run_id: "ct-sample-run" } }, body: { from_step: 0 } },
  "POST /v1/runs/{run_id}/steps/{step}/complete": {
    params: { path: { run_id: "ct-sample-run", step: 0 } },
    body: { outcome: "succeed", result: { sampled: true } },
  },
  "POST /v1/runs/{run_id}/steps/{step}/heartbeat": {
    params: { path: { run_id: "ct-sample-run", step: 0 } },
    body: { details: { progress: 1 } },
  },
  "POST /v1/runs:cancel": { body: { workflow: "ct-sample", status: ["scheduled"] } },
  "PUT /v1/groups/{group_id}": {
    params: { path: { group_id: "ct-sample-group" } },
    body: { workflow: "ct-sample", members: [{ key: "a", input: 1 }] },
  },
  "GET /v1/groups/{group_id}": { params: { path: { group_id: "ct-sample-group" } } },
  "DELETE /v1/groups/{group_id}": { params: { path: { group_id: "ct-sample-group" } } },
  "POST /v1/groups/{group_id}/cancel": { params: { path: { group_id: "ct-sample-group" } } },
  "GET /v1/schedules": { params: { query: { limit: 5 } } },
  "PUT /v1/schedules/{schedule_id}": {
    params: { path: { schedule_id: "ct-sample-schedule" } },
    body: { workflow: "ct-sample", cron: "@daily", paused: true },
  },
  "GET /v1/schedules/{schedule_id}": { params: { path: { schedule_id: "ct-sample-schedule" } } },
  "DELETE /v1/schedules/{schedule_id}": { params: { path: { schedule_id: "ct-sample-schedule" } } },
  "POST /v1/schedules/{schedule_id}/pause": { params: { path: { schedule_id: "ct-sample-schedule" } }, body: { note: "sampled" } },
  "POST /v1/schedules/{schedule_id}/resume": { params: { path: { schedule_id: "ct-sample-schedule" } } },
  "POST /v1/schedules/{schedule_id}/trigger": { params: { path: { schedule_id: "ct-sample-schedule" } } },
  "POST /v1/schedules/{schedule_id}/backfill": {
    params: { path: { schedule_id: "ct-sample-schedule" } },
    body: { from: "2026-01-01T00:00:00Z", to: "2026-01-02T00:00:00Z" },
  },
  "GET /v1/dead-letters": { params: { query: { kind: "step", limit: 5 } } },
  "POST /v1/dead-letters/{id}/redrive": { params: { path: { id: "ct-sample-dead" } } },
  "DELETE /v1/dead-letters/{id}": { params: { path: { id: "ct-sample-dead" } } },
  "GET /v1/runs/{run_id}/memo/{key}": { params: { path: { run_id: "ct-sample-run", key: "m" } } },
  "PUT /v1/runs/{run_id}/memo/{key}": {
    params: { path: { run_id: "ct-sample-run", key: "m" } },
    body: { value: { cached: true } },
  },
  "DELETE /v1/runs/{run_id}/memo/{key}": { params: { path: { run_id: "ct-sample-run", key: "m" } } },
  "GET /v1/runs/{run_id}/steps/{step}/memo/{key}": {
    params: { path: { run_id: "ct-sample-run", step: 0, key: "m" } },
  },
  "PUT /v1/runs/{run_id}/steps/{step}/memo/{key}": {
    params: { path: { run_id: "ct-sample-run", step: 0, key: "m" } },
    body: { value: [1, 2, 3] },
  },
  "DELETE /v1/runs/{run_id}/steps/{step}/memo/{key}": {
    params: { path: { run_id: "ct-sample-run", step: 0, key: "m" } },
  },
  "POST /v1/signals/{correlation_key}": {
    params: { path: { correlation_key: "ct-sample-key" } },
    body: { payload: { ok: true } },
  },
  "DELETE /v1/signals/{correlation_key}": { params: { path: { correlation_key: "ct-sample-key" } } },
  "GET /v1/kv": { params: { query: { prefix: "app/", limit: 5 } } },
  "GET /v1/kv/{key}": { params: { path: { key: "app/ct/sample" } } },
  "PUT /v1/kv/{key}": { params: { path: { key: "app/ct/sample" } }, body: { value: "v" } },
  "DELETE /v1/kv/{key}": { params: { path: { key: "app/ct/sample" } } },
};

/** The operations that take only the delivery token of a step attempt (no API token). */
export const ATTEMPT_OPERATIONS = new Set([
  "POST /v1/runs/{run_id}/steps/{step}/complete",
  "POST /v1/runs/{run_id}/steps/{step}/heartbeat",
]);

/** Where the auth phase leaves the delivery token of ct-sample-run's pending step 0 for the dbdown phase. */
export const sampleAttemptTokenFile = (env: Env) => path.join(path.dirname(env.obsFile), "sample-attempt-token");

/** Sends the sample request of operation `key` ("METHOD /path"). */
export async function sendSample(
  api: Api,
  key: string,
  headers?: Record<string, string>,
): Promise<{ status: number; body: unknown; response: Response }> {
  const s = SAMPLES[key];
  if (!s) throw new Error(`no sample request for ${key}`);
  const sp = key.indexOf(" ");
  const method = key.slice(0, sp);
  const path = key.slice(sp + 1);
  // The generic form of the typed client: the path is a runtime value here.
  const r = await (api.request as any)(method.toLowerCase(), path, {
    params: s.params,
    body: s.body,
    parseAs: s.parseAs,
    headers,
  });
  return { status: r.response.status, body: r.data ?? r.error, response: r.response };
}
