// The webhook helper with the running service: real signed step requests and callbacks
// from hookflow, answered through the SDK's handler with every outcome the protocol
// defines, the memo through the delivery token, pending steps completed later, errors
// retried or dead-lettered, and signatures refused or rotated.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  HookflowError,
  cancel,
  continueWith,
  fail,
  pending,
  permanentError,
  startChildren,
  succeed,
  transientError,
  waitForSignal,
  type StepHandler,
  type WorkflowInput,
} from "@hookflow/sdk";
import { Hooks, client, eventually, newSecret, unique } from "./helpers";

const api = client();
const hooks = new Hooks(newSecret());

before(() => hooks.start());
after(() => hooks.stop());

async function register(prefix: string, fn: StepHandler, extra: Partial<WorkflowInput> = {}): Promise<string> {
  const name = unique(prefix);
  hooks.route(name, fn);
  await api.putWorkflow(name, {
    url: `${hooks.base}/steps`,
    callback_url: `${hooks.base}/callbacks`,
    secret: hooks.secret as string,
    retry_backoff: { base_ms: 10, max_ms: 50 },
    ...extra,
  });
  return name;
}

async function history(runId: string): Promise<[number, number, string][]> {
  return (await api.getRunSteps(runId)).steps.map((s) => [s.step, s.attempt, s.result]);
}

type Bag = Record<string, unknown>;

describe("outcomes", () => {
  test("continue now, later, at a time, on a signal, on the first of two signals; succeed with kv; the callback", async () => {
    const wf = await register("flow", (req) => {
      const p = req.payload as Bag;
      const run = req.run_id;
      switch (req.step) {
        case 0:
          return continueWith({ ...p, s0: true }, { delay_ms: 50 });
        case 1:
          return continueWith(p, { run_at: new Date(Date.now() - 1000) });
        case 2:
          return waitForSignal(`one:${run}`, { timeout_ms: 60000, payload: p });
        case 3:
          return waitForSignal([`x:${run}`, `y:${run}`], { timeout_ms: 60000, payload: { ...p, first: req.signal } });
        default:
          return succeed({ ...p, second: req.signal }, { kv: { put: { [`app/${run}`]: { done: true } } } });
      }
    });
    const run = unique("flow-run");
    await api.submitRun({ workflow: wf, run_id: run, input: { order: 42 }, headers: { tenant: "acme" } });
    const s2 = await hooks.stepOf(run, 2);
    assert.equal(s2.request.headers.tenant, "acme");
    assert.match(s2.request.memo.token, /^hf1\./);
    assert.ok(Date.parse(s2.request.deadline) > Date.now() - 60000);
    await api.sendSignal(`one:${run}`, { payload: { approved: true } });
    await hooks.stepOf(run, 3);
    await api.sendSignal(`y:${run}`, { payload: { via: "y" } });

    const done = await api.waitForRun(run, { timeoutMs: 20000 });
    assert.equal(done.status, "succeeded", JSON.stringify(done));
    assert.deepEqual(done.result, {
      order: 42,
      s0: true,
      first: { status: "delivered", payload: { approved: true } },
      second: { status: "delivered", correlation_key: `y:${run}`, payload: { via: "y" } },
    });
    assert.deepEqual(await history(run), [
      [0, 1, "continue"],
      [1, 1, "continue"],
      [2, 1, "continue"],
      [3, 1, "continue"],
      [4, 1, "succeed"],
    ]);
    assert.deepEqual((await api.getKv(`app/${run}`)).value, { done: true });
    const cb = await hooks.callbackOf(run);
    assert.equal(cb.status, "succeeded");
    assert.deepEqual(cb.result, done.result);
  });

  test("fail and cancel end the run with their reason", async () => {
    const wf = await register("end", (req) =>
      (req.payload as Bag).do === "fail" ? fail("card declined") : cancel("user left"),
    );
    const [f, c] = [unique("fail"), unique("cancel")];
    await api.submitRun({ workflow: wf, run_id: f, input: { do: "fail" } });
    await api.submitRun({ workflow: wf, run_id: c, input: { do: "cancel" } });
    const failed = await api.waitForRun(f, { timeoutMs: 20000 });
    assert.deepEqual([failed.status, failed.error, failed.error_kind], ["failed", "card declined", "permanent"]);
    const cancelled = await api.waitForRun(c, { timeoutMs: 20000 });
    assert.deepEqual([cancelled.status, cancelled.error], ["cancelled", "user left"]);
    assert.equal((await hooks.callbackOf(f)).status, "failed");
    assert.equal((await hooks.callbackOf(c)).status, "cancelled");
  });

  test("children: started, waited for, handed to the next step, listed", async () => {
    const child = await register("child", (req) => succeed((req.payload as number) * 10));
    const wf = await register("parent", (req) =>
      req.step === 0
        ? startChildren(
            [
              { key: "c1", workflow: child, input: 1 },
              { key: "c2", workflow: child, input: 2 },
            ],
            { payload: "p", wait: { mode: "all", timeout_ms: 60000 } },
          )
        : succeed({ payload: req.payload, children: (req.children ?? []).map((c) => [c.key, c.status, c.result]) }),
    );
    const run = unique("parent-run");
    await api.submitRun({ workflow: wf, run_id: run });
    const done = await api.waitForRun(run, { timeoutMs: 20000 });
    assert.deepEqual(done.result, {
      payload: "p",
      children: [
        ["c1", "succeeded", 10],
        ["c2", "succeeded", 20],
      ],
    });
    const kids = await api.getRunChildren(run);
    assert.deepEqual(
      kids.children.map((k) => [k.parent?.key, k.status]),
      [
        ["c1", "succeeded"],
        ["c2", "succeeded"],
      ],
    );
  });
});

describe("errors", () => {
  test("a thrown exception and a transient StepError are retried; the third attempt succeeds", async () => {
    const wf = await register("retry", (req) => {
      if (req.attempt === 1) throw new Error("boom");
      if (req.attempt === 2) return transientError("busy", { retry_after_ms: 0 });
      return succeed(req.attempt);
    });
    const run = unique("retry-run");
    await api.submitRun({ workflow: wf, run_id: run });
    const done = await api.waitForRun(run, { timeoutMs: 20000 });
    assert.equal(done.result, 3);
    const steps = (await api.getRunSteps(run)).steps;
    assert.deepEqual(
      steps.map((s) => [s.attempt, s.result, s.http_status]),
      [
        [1, "transient_error", 500],
        [2, "transient_error", 503],
        [3, "succeed", 200],
      ],
    );
    assert.match(steps[0].error ?? "", /boom/);
  });

  test("a permanent StepError dead-letters the step; redrive runs it again; a dead letter is deleted", async () => {
    const wf = await register("perm", (req) =>
      req.generation === 1 ? permanentError("no such order") : succeed({ generation: req.generation }),
    );
    const [a, b] = [unique("perm-a"), unique("perm-b")];
    await api.submitRun({ workflow: wf, run_id: a });
    await api.submitRun({ workflow: wf, run_id: b });
    for (const id of [a, b]) {
      const r = await api.waitForRun(id, { timeoutMs: 20000 });
      assert.equal(r.status, "failed");
      assert.match(r.error ?? "", /422.*no such order/);
    }
    const dead = (await api.listDeadLetters({ workflow: wf, kind: "step" })).dead_letters;
    assert.deepEqual(dead.map((d) => d.run_id).sort(), [a, b].sort());
    const da = dead.find((d) => d.run_id === a)!;
    assert.deepEqual(await api.redriveDeadLetter(da.id), { id: da.id, kind: "step", redriven: true });
    const again = await api.waitForRun(a, { timeoutMs: 20000 });
    assert.deepEqual([again.status, again.result], ["succeeded", { generation: 2 }]);
    const db = dead.find((d) => d.run_id === b)!;
    await api.deleteDeadLetter(db.id);
    assert.deepEqual((await api.listDeadLetters({ workflow: wf })).dead_letters, []);
  });
});

describe("step context", () => {
  test("the memo, through the delivery token, survives a retry", async () => {
    const wf = await register("memo", async (req, ctx) => {
      if (req.attempt === 1) {
        assert.deepEqual(await ctx.memo.get("quote"), { found: false, value: undefined });
        await ctx.memo.put("quote", { total: 2500 });
        await ctx.stepMemo.put("seen", [1]);
        await ctx.memo.put("scratch", 1);
        return transientError("retry me", { retry_after_ms: 0 });
      }
      const quote = await ctx.memo.get<{ total: number }>("quote");
      const seen = await ctx.stepMemo.get("seen");
      await ctx.memo.delete("scratch");
      const scratch = await ctx.memo.get("scratch");
      return succeed({ quote, seen, scratch: scratch.found, webhookId: ctx.webhookId });
    });
    const run = unique("memo-run");
    await api.submitRun({ workflow: wf, run_id: run });
    const done = await api.waitForRun(run, { timeoutMs: 20000 });
    const first = hooks.stepsOf(run)[0];
    assert.deepEqual(done.result, {
      quote: { found: true, value: { total: 2500 } },
      seen: { found: true, value: [1] },
      scratch: false,
      webhookId: first.ctx.webhookId,
    });
    assert.ok(first.ctx.webhookId.length > 0);
  });

  test("pending: a heartbeat, then complete with an outcome; completing twice is a 409", async () => {
    const wf = await register("pending", () => pending({ timeout_ms: 60000, heartbeat_timeout_ms: 30000 }));
    const run = unique("pending-run");
    await api.submitRun({ workflow: wf, run_id: run });
    const seen = await hooks.stepOf(run, 0);
    const open = await eventually("the step settled pending", async () => {
      const r = await api.getRun(run);
      return r.pending_since !== null && r;
    });
    assert.equal(open.status, "running");
    assert.deepEqual(await seen.ctx.heartbeat({ progress: 50 }), { cancel_requested: false });
    const steps = (await api.getRunSteps(run)).steps;
    assert.deepEqual(steps.at(-1)?.heartbeat?.details, { progress: 50 });
    const completed = await seen.ctx.complete(succeed("done later"));
    assert.equal(completed.run_id, run);
    const done = await api.waitForRun(run, { timeoutMs: 20000 });
    assert.deepEqual([done.status, done.result], ["succeeded", "done later"]);
    await assert.rejects(seen.ctx.complete(succeed("again")), (e: unknown) => {
      assert.ok(e instanceof HookflowError);
      assert.equal(e.status, 409);
      assert.equal(e.code, "already_completed");
      return true;
    });
  });

  test("pending, completed with a permanent StepError: the run fails with its message", async () => {
    const wf = await register("pending-err", () => pending());
    const run = unique("pending-err-run");
    await api.submitRun({ workflow: wf, run_id: run });
    const seen = await hooks.stepOf(run, 0);
    await eventually("the step settled pending", async () => (await api.getRun(run)).pending_since !== null);
    await seen.ctx.complete(permanentError("gave up"));
    const done = await api.waitForRun(run, { timeoutMs: 20000 });
    assert.deepEqual([done.status, done.error], ["failed", "gave up"]);
  });
});

describe("signatures on real requests", () => {
  test("a workflow signing with another secret gets 401: the run fails and no step reaches the handler", async () => {
    const wf = await register("wrong-secret", () => succeed(), { secret: newSecret() });
    const run = unique("wrong-run");
    await api.submitRun({ workflow: wf, run_id: run });
    const done = await api.waitForRun(run, { timeoutMs: 20000 });
    assert.equal(done.status, "failed");
    assert.match(done.error ?? "", /401.*no matching signature/);
    assert.deepEqual(hooks.stepsOf(run), []);
  });

  test("during a rotation's grace period both the old and the new secret verify", async () => {
    const wf = await register("rotate", (req) => succeed(req.payload));
    const rotated = await api.rotateWorkflowSecret(wf, { grace_ms: 600000 });
    const first = unique("rot-old");
    await api.submitRun({ workflow: wf, run_id: first, input: "old" });
    assert.equal((await api.waitForRun(first, { timeoutMs: 20000 })).result, "old");

    const fresh = new Hooks([rotated.secret]);
    await fresh.start();
    try {
      fresh.route(wf, (req) => succeed(req.payload));
      await api.putWorkflow(wf, { url: `${fresh.base}/steps`, retry_backoff: { base_ms: 10, max_ms: 50 } });
      const second = unique("rot-new");
      await api.submitRun({ workflow: wf, run_id: second, input: "new" });
      assert.equal((await api.waitForRun(second, { timeoutMs: 20000 })).result, "new");
      assert.equal(fresh.stepsOf(second).length, 1);
    } finally {
      await fresh.stop();
    }
  });
});
