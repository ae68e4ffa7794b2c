// The webhook helper on its own (no service): signatures against the Standard Webhooks
// test vector and the project's own library, the wire shape of every answer builder,
// and how a delivery is answered.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import { Webhook } from "standardwebhooks";
import {
  WebhookVerificationError,
  cancel,
  continueWith,
  fail,
  handleDelivery,
  handler,
  pending,
  permanentError,
  sign,
  startChildren,
  succeed,
  transientError,
  verifySignature,
  waitForSignal,
  type StepRequest,
} from "@hookflow/sdk";
import { newSecret } from "./helpers";

// The example of the Standard Webhooks specification.
const VECTOR = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};

function signed(secret: string, body: string, opts: { id?: string; ts?: number } = {}) {
  const id = opts.id ?? "msg_1";
  const ts = opts.ts ?? Math.floor(Date.now() / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(ts),
    "webhook-signature": sign(secret, id, ts, body),
  };
}

describe("signatures", () => {
  test("sign reproduces the Standard Webhooks test vector", () => {
    assert.equal(sign(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body), VECTOR.signature);
    assert.equal(sign(VECTOR.secret, VECTOR.id, VECTOR.timestamp, Buffer.from(VECTOR.body)), VECTOR.signature);
  });

  test("verifySignature accepts the vector at its time and refuses it 6 minutes later", () => {
    const headers = {
      "webhook-id": VECTOR.id,
      "webhook-timestamp": String(VECTOR.timestamp),
      "webhook-signature": VECTOR.signature,
    };
    verifySignature(VECTOR.secret, headers, VECTOR.body, { nowS: VECTOR.timestamp + 299 });
    assert.throws(
      () => verifySignature(VECTOR.secret, headers, VECTOR.body, { nowS: VECTOR.timestamp + 360 }),
      /too far from now/,
    );
    assert.throws(
      () => verifySignature(VECTOR.secret, headers, VECTOR.body, { nowS: VECTOR.timestamp - 360 }),
      /too far from now/,
    );
  });

  test("agrees with the standardwebhooks library both ways", () => {
    const secret = newSecret();
    const lib = new Webhook(secret);
    const body = JSON.stringify({ run_id: "r1", step: 0, payload: { "é": [1, 2] } });
    const now = new Date();
    const theirs = lib.sign("msg_x", now, body);
    const ts = Math.floor(now.getTime() / 1000);
    assert.equal(sign(secret, "msg_x", ts, body), theirs);
    verifySignature(secret, { "webhook-id": "msg_x", "webhook-timestamp": String(ts), "webhook-signature": theirs }, body);
    lib.verify(body, signed(secret, body, { id: "msg_x", ts }));
  });

  test("refuses a missing header, another secret, a changed body, a bad timestamp", () => {
    const secret = newSecret();
    const body = '{"a":1}';
    const good = signed(secret, body);
    for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"] as const) {
      const h: Record<string, string> = { ...good };
      delete h[name];
      assert.throws(() => verifySignature(secret, h, body), WebhookVerificationError, `without ${name}`);
    }
    assert.throws(() => verifySignature(newSecret(), good, body), /no matching signature/);
    assert.throws(() => verifySignature(secret, good, '{"a":2}'), /no matching signature/);
    assert.throws(() => verifySignature(secret, { ...good, "webhook-timestamp": "12a" }, body), /not unix seconds/);
    assert.throws(() => verifySignature(secret, { ...good, "webhook-signature": "v2,abc" }, body), /no matching/);
  });

  test("any of several signatures, any of several secrets, any header casing", () => {
    const [a, b] = [newSecret(), newSecret()];
    const body = "{}";
    const h = signed(a, body);
    const two = { ...h, "webhook-signature": `v1,bm90IGl0 ${h["webhook-signature"]}` };
    verifySignature(a, two, body);
    verifySignature([b, a], h, body);
    assert.throws(() => verifySignature([b], h, body), /no matching signature/);
    verifySignature(a, { "Webhook-Id": h["webhook-id"], "WEBHOOK-TIMESTAMP": h["webhook-timestamp"], "Webhook-Signature": h["webhook-signature"] }, body);
    verifySignature(a, new Headers(h), body);
  });

  test("a secret that is not whsec_ + base64 is refused", () => {
    assert.throws(() => sign("whsec_not base64!", "m", 1, ""), /secret/);
    assert.throws(() => handler("", () => succeed()), /secret is required/);
  });
});

describe("answer builders", () => {
  test("every outcome has the wire shape of the protocol", () => {
    const kv = { put: { "app/k": { v: 1 } }, delete: ["app/old"] };
    assert.deepEqual(continueWith({ n: 1 }), { outcome: "continue", payload: { n: 1 } });
    assert.deepEqual(continueWith(), { outcome: "continue", payload: null });
    assert.deepEqual(continueWith({ n: 1 }, { delay_ms: 60000, kv }), {
      outcome: "continue",
      payload: { n: 1 },
      delay_ms: 60000,
      kv,
    });
    assert.deepEqual(continueWith(1, { run_at: new Date(Date.UTC(2026, 11, 3, 8)) }), {
      outcome: "continue",
      payload: 1,
      run_at: "2026-12-03T08:00:00.000Z",
    });
    assert.deepEqual(waitForSignal("payment:42", { timeout_ms: 604800000, payload: { o: 42 } }), {
      outcome: "continue",
      payload: { o: 42 },
      wait_for_signal: { correlation_key: "payment:42", timeout_ms: 604800000 },
    });
    assert.deepEqual(waitForSignal(["payment:42", "refund:42"], { timeout_ms: 1000 }), {
      outcome: "continue",
      payload: null,
      wait_for_signal: { correlation_keys: ["payment:42", "refund:42"], timeout_ms: 1000 },
    });
    const children = [{ key: "invoice", workflow: "invoices", input: { o: 42 } }];
    assert.deepEqual(startChildren(children, { payload: 7, wait: { mode: "any", timeout_ms: 3600000 } }), {
      outcome: "continue",
      payload: 7,
      children,
      wait_for_children: { mode: "any", timeout_ms: 3600000 },
    });
    assert.deepEqual(succeed({ shipped: true }, { kv }), { outcome: "succeed", result: { shipped: true }, kv });
    assert.deepEqual(succeed(), { outcome: "succeed", result: null });
    assert.deepEqual(fail("card declined"), { outcome: "fail", reason: "card declined" });
    assert.deepEqual(cancel("user left", { kv }), { outcome: "cancel", reason: "user left", kv });
    assert.deepEqual(pending(), { outcome: "pending" });
    assert.deepEqual(pending({ timeout_ms: 3600000, heartbeat_timeout_ms: 300000 }), {
      outcome: "pending",
      timeout_ms: 3600000,
      heartbeat_timeout_ms: 300000,
    });
  });

  test("combinations the protocol refuses throw at once", () => {
    assert.throws(() => continueWith(1, { delay_ms: 1, run_at: "2026-01-01T00:00:00Z" }), /exclude/);
    assert.throws(() => waitForSignal([], { timeout_ms: 1 }), /at least one key/);
    assert.throws(() => startChildren([]), /at least one child/);
  });

  test("errors: transient 503 with Retry-After, permanent 422", () => {
    const t = transientError("busy", { retry_after_ms: 1500 });
    assert.equal(t.status, 503);
    assert.deepEqual(t.toJSON(), { error: { message: "busy", retryable: true } });
    const p = permanentError("no such order", { status: 404 });
    assert.equal(p.status, 404);
    assert.deepEqual(p.toJSON(), { error: { message: "no such order", retryable: false } });
  });
});

const STEP: StepRequest<{ n: number }> = {
  run_id: "r1",
  workflow: "w",
  step: 0,
  attempt: 1,
  max_attempts: 3,
  generation: 1,
  payload: { n: 1 },
  headers: {},
  concurrency_key: null,
  deadline: "2026-12-02T10:00:30.000Z",
  memo: { url: "http://127.0.0.1:9/v1/runs/r1", token: "hf1.x.1.0.1.1.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" },
};

describe("handleDelivery", () => {
  const secret = newSecret();
  const deliver = (body: unknown, fn: Parameters<typeof handleDelivery>[1], opts = {}) => {
    const raw = JSON.stringify(body);
    return handleDelivery(secret, fn, { headers: signed(secret, raw), body: raw }, { onError: () => {}, ...opts });
  };

  test("an outcome is 200, pending is 202, the body is the outcome", async () => {
    const a = await deliver(STEP, (req) => succeed((req.payload as { n: number }).n + 1));
    assert.equal(a.status, 200);
    assert.deepEqual(JSON.parse(a.body), { outcome: "succeed", result: 2 });
    assert.equal(a.headers["Content-Type"], "application/json");
    const p = await deliver(STEP, () => pending({ timeout_ms: 1000 }));
    assert.equal(p.status, 202);
    assert.deepEqual(JSON.parse(p.body), { outcome: "pending", timeout_ms: 1000 });
  });

  test("a StepError returned or thrown is its status and body; Retry-After in whole seconds", async () => {
    const r = await deliver(STEP, () => transientError("busy", { retry_after_ms: 1500 }));
    assert.equal(r.status, 503);
    assert.equal(r.headers["Retry-After"], "2");
    assert.deepEqual(JSON.parse(r.body), { error: { message: "busy", retryable: true } });
    const t = await deliver(STEP, () => {
      throw permanentError("bad order");
    });
    assert.equal(t.status, 422);
    assert.deepEqual(JSON.parse(t.body), { error: { message: "bad order", retryable: false } });
  });

  test("any other exception is a transient 500; so is a handler that returns no outcome", async () => {
    const seen: unknown[] = [];
    const r = await deliver(STEP, () => {
      throw new Error("db down");
    }, { onError: (e: unknown) => seen.push(e) });
    assert.equal(r.status, 500);
    assert.deepEqual(JSON.parse(r.body), { error: { message: "db down", retryable: true } });
    assert.equal(seen.length, 1);
    const n = await deliver(STEP, () => ({ nope: 1 }) as never);
    assert.equal(n.status, 500);
  });

  test("a bad signature is 401 and the handler is not called", async () => {
    let called = false;
    const told: unknown[] = [];
    const raw = JSON.stringify(STEP);
    const a = await handleDelivery(
      secret,
      () => ((called = true), succeed()),
      { headers: signed(newSecret(), raw), body: raw },
      { onError: (e) => told.push(e) },
    );
    assert.equal(a.status, 401);
    assert.deepEqual(JSON.parse(a.body), { error: { message: "no matching signature", retryable: false } });
    assert.equal(called, false);
    assert.equal(told.length, 1);
    assert.ok(told[0] instanceof WebhookVerificationError);
  });

  test("a body without memo is a callback, for the callback handler; without one it is 404", async () => {
    const cb = {
      run_id: "r1",
      workflow: "w",
      status: "succeeded",
      result: 1,
      error: null,
      error_kind: null,
      headers: {},
      final_step: 0,
      generation: 1,
      finished_at: "2026-12-02T10:05:00.000Z",
      group: null,
      concurrency_key: null,
    };
    const got: unknown[] = [];
    const a = await deliver(cb, () => succeed(), { callback: (c: unknown, ctx: { webhookId: string }) => void got.push([c, ctx.webhookId]) });
    assert.equal(a.status, 200);
    assert.deepEqual(got, [[cb, "msg_1"]]);
    assert.equal((await deliver(cb, () => succeed())).status, 404);
    assert.equal((await deliver([1], () => succeed())).status, 400);
    assert.equal((await deliver({ ...STEP, step: "0" }, () => succeed())).status, 400);
  });

  test("null secret skips verification (an unsigned workflow)", async () => {
    const raw = JSON.stringify(STEP);
    const a = await handleDelivery(null, () => succeed(), { headers: {}, body: raw });
    assert.equal(a.status, 200);
  });
});

describe("handler (node:http)", () => {
  async function serve(h: http.RequestListener) {
    const server = http.createServer(h);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/steps`;
    return { url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
  }

  test("answers a signed POST, refuses GET (405) and a body over the cap (413)", async () => {
    const secret = newSecret();
    const s = await serve(handler(secret, (req) => succeed(req.payload), { maxBodyBytes: 4096 }));
    try {
      const raw = JSON.stringify(STEP);
      const ok = await fetch(s.url, { method: "POST", headers: signed(secret, raw), body: raw });
      assert.equal(ok.status, 200);
      assert.deepEqual(await ok.json(), { outcome: "succeed", result: { n: 1 } });
      const get = await fetch(s.url);
      assert.equal(get.status, 405);
      const big = JSON.stringify({ ...STEP, payload: "x".repeat(5000) });
      const r = await fetch(s.url, { method: "POST", headers: signed(secret, big), body: big });
      assert.equal(r.status, 413);
    } finally {
      await s.close();
    }
  });
});
