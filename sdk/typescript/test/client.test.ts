// The client against the running service: every group of operations, paging, waits,
// and how errors come out (HookflowError with status, code, field, request id).
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { HookflowClient, HookflowError, OPERATIONS, succeed, type operations } from "@hookflow/sdk";
import { Hooks, client, env, newSecret, unique } from "./helpers";

const api = client();
const hooks = new Hooks(newSecret());
let wf = "";

before(async () => {
  await hooks.start();
  wf = unique("client");
  hooks.route(wf, (req) => succeed({ echo: req.payload }));
  await api.putWorkflow(wf, {
    url: `${hooks.base}/steps`,
    secret: hooks.secret as string,
    retry_backoff: { base_ms: 10, max_ms: 100 },
  });
});

after(async () => {
  await hooks.stop();
});

async function rejects(p: Promise<unknown>, want: Partial<HookflowError>): Promise<HookflowError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof HookflowError, `a HookflowError, not ${String(e)}`);
    for (const [k, v] of Object.entries(want)) assert.equal(e[k as keyof HookflowError], v, `${k} of ${e.message}`);
    return e;
  }
  assert.fail("the call did not fail");
}

describe("operations", () => {
  test("every operation of the spec is a method of the client", () => {
    // build/test/ -> the repository's openapi/openapi.yaml
    const spec = fs.readFileSync(path.resolve(__dirname, "../../../../openapi/openapi.yaml"), "utf8");
    const ids = [...spec.matchAll(/^\s+operationId: (\w+)$/gm)]
      .map((m) => m[1])
      .filter((id) => id !== "stepWebhook" && id !== "callbackWebhook");
    assert.ok(ids.length > 40, `${ids.length} operations found in the spec`);
    assert.deepEqual(Object.keys(OPERATIONS).sort(), [...ids].sort());
    for (const m of ids) assert.equal(typeof (api as unknown as Record<string, unknown>)[m], "function", m);
    // A compile-time check too: a new operation without a method fails tsc here.
    type Missing = Exclude<keyof operations, keyof HookflowClient | "stepWebhook" | "callbackWebhook">;
    const none: [Missing] extends [never] ? true : Missing = true;
    assert.equal(none, true);
  });

  test("health, readiness, metrics, the spec, the dashboard, whoami, endpoints", async () => {
    assert.deepEqual(await api.getHealthz(), { status: "ok" });
    assert.equal((await api.getReadyz()).status, "ready");
    assert.match(await api.getMetrics(), /^# (HELP|TYPE) hookflow_/m);
    assert.match(await api.getOpenapi(), /^openapi: 3\.1\.0/);
    assert.match(await api.getDashboard(), /<html/i);
    assert.deepEqual(await api.getWhoami(), { scope: "admin", token_required: true });
    assert.deepEqual(await client(env.readToken).getWhoami(), { scope: "read", token_required: true });
    const ep = await api.listEndpoints();
    assert.equal(typeof ep.instance, "string");
    assert.ok(Array.isArray(ep.endpoints));
  });
});

describe("workflows", () => {
  test("put (201 then 200), get, list with paging, pause, resume, rotate the secret, delete", async () => {
    const a = unique("wf-a");
    const b = unique("wf-b");
    const created = await api.putWorkflow(a, { url: `${hooks.base}/steps`, secret: newSecret(), timeout_ms: 5000 });
    assert.equal(created.name, a);
    assert.equal(created.signed, true);
    assert.equal(created.timeout_ms, 5000);
    assert.equal(created.max_attempts, 3, "defaults filled in");
    await api.putWorkflow(b, { url: `${hooks.base}/steps` });
    assert.equal((await api.getWorkflow(b)).signed, false);

    const names: string[] = [];
    for await (const w of api.paginate((cursor) => api.listWorkflows({ limit: 1, cursor }), "workflows")) {
      names.push(w.name);
    }
    assert.ok(names.includes(a) && names.includes(b) && names.includes(wf), names.join(","));
    assert.equal(new Set(names).size, names.length, "every workflow once");

    assert.equal((await api.pauseWorkflow(a)).paused, true);
    assert.equal((await api.resumeWorkflow(a, {})).paused, false);
    const rotated = await api.rotateWorkflowSecret(a, { grace_ms: 60000 });
    assert.match(rotated.secret, /^whsec_/);
    assert.notEqual(rotated.previous_valid_until, null);
    assert.equal(rotated.workflow.name, a);

    await api.deleteWorkflow(a);
    await api.deleteWorkflow(b);
    await rejects(api.getWorkflow(a), { status: 404, code: "not_found" });
  });
});

describe("runs", () => {
  test("submit, submit again, wait, steps, list with filters and paging, rerun", async () => {
    const runId = unique("run");
    const first = await api.submitRun({ workflow: wf, run_id: runId, input: { n: 1 }, headers: { tenant: "acme" } });
    assert.equal(first.newly_submitted, true);
    const again = await api.submitRun({ workflow: wf, run_id: runId, input: { n: 1 } });
    assert.equal(again.newly_submitted, false);
    const err = await rejects(api.submitRun({ workflow: wf, run_id: runId, input: { n: 2 } }), {
      status: 409,
      code: "input_mismatch",
    });
    assert.match(err.requestId ?? "", /^[A-Za-z0-9._:-]+$/);

    const done = await api.waitForRun(runId, { timeoutMs: 20000 });
    assert.equal(done.status, "succeeded");
    assert.deepEqual(done.result, { echo: { n: 1 } });
    assert.deepEqual(done.headers, { tenant: "acme" });
    const steps = await api.getRunSteps(runId);
    assert.deepEqual(
      steps.steps.map((s) => [s.step, s.attempt, s.result]),
      [[0, 1, "succeed"]],
    );

    const second = unique("run");
    await api.submitRun({ workflow: wf, run_id: second, input: { n: 2 } });
    await api.waitForRun(second, { timeoutMs: 20000 });
    const seen: string[] = [];
    for await (const r of api.paginate(
      (cursor) => api.listRuns({ workflow: wf, status: "succeeded", limit: 1, cursor }),
      "runs",
    )) {
      seen.push(r.run_id);
    }
    assert.ok(seen.includes(runId) && seen.includes(second), seen.join(","));
    assert.deepEqual((await api.getRunChildren(runId)).children, []);

    const rerun = await api.rerunRun(runId, { from_step: 0, input: { n: 3 } });
    assert.equal(rerun.generation, 2);
    const third = await api.waitForRun(runId, { timeoutMs: 20000 });
    assert.deepEqual(third.result, { echo: { n: 3 } });
  });

  test("cancel a scheduled run, cancel in bulk, a terminal run is already_terminal", async () => {
    const one = unique("sched");
    const run = await api.submitRun({ workflow: wf, run_id: one, delay_ms: 3600000 });
    assert.equal(run.status, "scheduled");
    const cancelled = await api.cancelRun(one);
    assert.equal(cancelled.status, "cancelled");
    await rejects(api.cancelRun(one), { status: 409, code: "already_terminal" });

    const ids = [unique("bulk"), unique("bulk")];
    for (const id of ids) await api.submitRun({ workflow: wf, run_id: id, delay_ms: 3600000 });
    assert.deepEqual(await api.cancelRuns({ workflow: wf, status: ["scheduled"] }), { cancelled: 2 });
    for (const id of ids) assert.equal((await api.getRun(id)).status, "cancelled");
  });

  test("getRun with wait_ms answers a run that is not done after the wait", async () => {
    const id = unique("wait");
    await api.submitRun({ workflow: wf, run_id: id, delay_ms: 3600000 });
    const t = Date.now();
    const r = await api.getRun(id, { wait_ms: 300 });
    assert.equal(r.status, "scheduled");
    assert.ok(Date.now() - t >= 250, "it waited");
    const w = await api.waitForRun(id, { timeoutMs: 200 });
    assert.equal(w.status, "scheduled");
    await api.cancelRun(id);
  });
});

describe("groups, signals, kv, memo", () => {
  test("a group: put, wait, read, cancel, delete", async () => {
    const g = unique("group");
    const put = await api.putGroup(g, {
      workflow: wf,
      members: [
        { key: "a", input: 1 },
        { key: "b", input: 2 },
      ],
    });
    assert.equal(put.total, 2);
    assert.equal(put.submitted, 2);
    const done = await api.waitForGroup(g, { timeoutMs: 20000 });
    assert.equal(done.succeeded, 2);
    assert.deepEqual(
      done.members.map((m) => [m.key, m.result]),
      [
        ["a", { echo: 1 }],
        ["b", { echo: 2 }],
      ],
    );
    const page = await api.getGroup(g, { limit: 1 });
    assert.equal(page.members.length, 1);
    assert.notEqual(page.next_cursor, null);
    assert.deepEqual(await api.cancelGroup(g), { cancelled: 0 });
    await api.deleteGroup(g);
    await rejects(api.getGroup(g), { status: 404 });
  });

  test("a signal with no waiter is buffered, then cleared", async () => {
    const key = `${unique("sig")}:a/b c`;
    assert.deepEqual(await api.sendSignal(key, { payload: { x: 1 } }), { outcome: "buffered" });
    assert.deepEqual(await api.clearSignal(key), { removed: true });
    assert.deepEqual(await api.clearSignal(key), { removed: false });
  });

  test("kv: put, get, list by prefix with paging, delete", async () => {
    const prefix = `app/${unique("kv")}/`;
    await api.putKv(`${prefix}a`, { value: { n: 1 } });
    const b = await api.putKv(`${prefix}b c`, { value: [2] });
    assert.equal(b.key, `${prefix}b c`);
    assert.deepEqual((await api.getKv(`${prefix}a`)).value, { n: 1 });
    const keys: string[] = [];
    for await (const item of api.paginate((cursor) => api.listKv({ prefix, limit: 1, cursor }), "items")) {
      keys.push(item.key);
    }
    assert.deepEqual(keys, [`${prefix}a`, `${prefix}b c`]);
    await api.deleteKv(`${prefix}a`);
    await rejects(api.getKv(`${prefix}a`), { status: 404, code: "not_found" });
  });

  test("memo with an API token: run and step scopes", async () => {
    const id = unique("memo");
    await api.submitRun({ workflow: wf, run_id: id, delay_ms: 3600000 });
    await api.putRunMemo(id, "quote/1", { value: { total: 5 } });
    assert.deepEqual(await api.getRunMemo(id, "quote/1"), { value: { total: 5 } });
    await api.putStepMemo(id, 0, "k", { value: "s" });
    assert.deepEqual(await api.getStepMemo(id, 0, "k"), { value: "s" });
    await api.deleteStepMemo(id, 0, "k");
    await rejects(api.getStepMemo(id, 0, "k"), { status: 404 });
    await api.deleteRunMemo(id, "quote/1");
    await rejects(api.getRunMemo(id, "quote/1"), { status: 404 });
    await api.cancelRun(id);
  });
});

describe("schedules", () => {
  test("put, get, list, pause, resume, trigger, backfill, delete", async () => {
    const id = unique("sched");
    const s = await api.putSchedule(id, { workflow: wf, every_ms: 3600000, paused: true, input: { from: "schedule" } });
    assert.equal(s.id, id);
    assert.equal(s.paused, true);
    assert.equal((await api.getSchedule(id)).next_fire_times.length, 10);
    const ids: string[] = [];
    for await (const item of api.paginate((cursor) => api.listSchedules({ limit: 1, cursor }), "schedules")) {
      ids.push(item.id);
    }
    assert.ok(ids.includes(id));
    assert.equal((await api.resumeSchedule(id, { note: "on" })).paused, false);
    assert.equal((await api.pauseSchedule(id)).paused, true);
    const trig = await api.triggerSchedule(id);
    assert.equal(trig.outcome, "started");
    assert.equal((await api.waitForRun(trig.run_id as string, { timeoutMs: 20000 })).status, "succeeded");
    const back = await api.backfillSchedule(id, { from: "2026-01-01T00:00:00Z", to: "2026-01-01T02:00:00Z" });
    assert.deepEqual(back, { fire_times: 2, started: 2, skipped: 0, buffered: 0 });
    await api.deleteSchedule(id);
    await rejects(api.getSchedule(id), { status: 404 });
  });
});

describe("errors", () => {
  test("invalid_argument names its field", async () => {
    const e = await rejects(api.putWorkflow(unique("bad"), { url: "ftp://x" }), {
      status: 400,
      code: "invalid_argument",
    });
    assert.equal(e.field, "url");
    assert.deepEqual((e.body as { error: { code: string } }).error.code, "invalid_argument");
  });

  test("no token is 401, a read token writing is 403, an unknown run is 404", async () => {
    await rejects(client("").getWhoami(), { status: 401, code: "unauthenticated" });
    await rejects(client(env.readToken).submitRun({ workflow: wf }), { status: 403, code: "forbidden" });
    await rejects(api.getRun(unique("nope")), { status: 404, code: "not_found", field: null });
  });

  test("a path parameter is required", async () => {
    await assert.rejects(api.getRun(""), /run_id: required/);
  });

  test("no answer: network_error, and timeout", async () => {
    const server = http.createServer(() => {}); // accepts and never answers
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const slow = new HookflowClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 200 });
      await rejects(slow.getHealthz(), { status: 0, code: "timeout" });
      const ctl = new AbortController();
      const p = slow.getHealthz({ signal: ctl.signal, timeoutMs: 10000 });
      ctl.abort();
      await rejects(p, { status: 0, code: "aborted" });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    const closed = new HookflowClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 2000 });
    await rejects(closed.getHealthz(), { status: 0, code: "network_error" });
  });

  test("X-Request-Id is sent and comes back on errors", async () => {
    const e = await rejects(api.getRun(unique("nope"), undefined, { requestId: "sdk-test.1" }), { status: 404 });
    assert.equal(e.requestId, "sdk-test.1");
  });
});
