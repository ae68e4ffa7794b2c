// The webhook side of hookflow: Standard Webhooks signatures, the typed step and callback
// requests, a builder for every answer the protocol defines, the step's memo, completion
// and heartbeat through its delivery token, and a node:http handler.
import crypto from "node:crypto";
import type http from "node:http";
import { HookflowClient, HookflowError } from "./client";
import type * as T from "./generated/types";

/** The body of a step delivery; `P` types its payload. */
export type StepRequest<P = unknown> = Omit<T.StepRequest, "payload"> & { payload: P };
type CallbackRequest = T.CallbackRequest;
type StepOutcome = T.StepOutcome;
type KvEffects = T.KvEffects;
type ChildRun = T.ChildRun;
type WaitForChildren = T.WaitForChildren;

/**
 * A signing secret (`whsec_` + base64 of the key, as given to the workflow), or several:
 * a request signed by any of them verifies (a receiver's side of a rotation).
 */
export type Secret = string | readonly string[];

/** Headers as node:http gives them, or a fetch Headers. */
export type HeaderSource = Record<string, string | string[] | undefined> | { get(name: string): string | null };

/** Standard Webhooks' default: a timestamp more than 5 minutes from now is refused. */
export const DEFAULT_TOLERANCE_S = 300;

export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError";
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === "function") {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const rec = headers as Record<string, string | string[] | undefined>;
  let v = rec[name];
  if (v === undefined) {
    const key = Object.keys(rec).find((k) => k.toLowerCase() === name);
    v = key === undefined ? undefined : rec[key];
  }
  return Array.isArray(v) ? v.join(" ") : v;
}

/** The HMAC key of a secret: the base64-decoded part after `whsec_`. */
export function secretKey(secret: string): Buffer {
  const b64 = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) {
    throw new TypeError("secret: must be whsec_ followed by standard base64");
  }
  return Buffer.from(b64, "base64");
}

function toBuffer(body: string | Uint8Array): Buffer {
  return typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/** The `webhook-signature` value of a request: `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`. */
export function sign(secret: string, webhookId: string, timestampS: number, body: string | Uint8Array): string {
  const mac = crypto
    .createHmac("sha256", secretKey(secret))
    .update(`${webhookId}.${timestampS}.`)
    .update(toBuffer(body))
    .digest("base64");
  return `v1,${mac}`;
}

/**
 * Verifies the Standard Webhooks headers of a request against its raw body (the bytes as
 * received, not JSON parsed and encoded again): `webhook-id`, `webhook-timestamp` within
 * `toleranceS` of now, and a `webhook-signature` (one of several, space separated) made
 * with one of the secrets. Throws WebhookVerificationError otherwise.
 */
export function verifySignature(
  secret: Secret,
  headers: HeaderSource,
  body: string | Uint8Array,
  options: { toleranceS?: number; nowS?: number } = {},
): void {
  const secrets = typeof secret === "string" ? [secret] : [...secret];
  if (secrets.length === 0) throw new TypeError("secret: at least one is required");
  const id = header(headers, "webhook-id");
  const stamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !stamp || !signatures) {
    throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature");
  }
  if (!/^[0-9]{1,15}$/.test(stamp)) throw new WebhookVerificationError("webhook-timestamp: not unix seconds");
  const now = options.nowS ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(stamp)) > (options.toleranceS ?? DEFAULT_TOLERANCE_S)) {
    throw new WebhookVerificationError("webhook-timestamp: too far from now");
  }
  const raw = toBuffer(body);
  const expected = secrets.map((s) =>
    crypto.createHmac("sha256", secretKey(s)).update(`${id}.${stamp}.`).update(raw).digest(),
  );
  for (const sig of signatures.split(" ")) {
    const comma = sig.indexOf(",");
    if (comma < 0 || sig.slice(0, comma) !== "v1") continue;
    const got = Buffer.from(sig.slice(comma + 1), "base64");
    for (const e of expected) {
      if (got.length === e.length && crypto.timingSafeEqual(got, e)) return;
    }
  }
  throw new WebhookVerificationError("no matching signature");
}

// ---- answers ----------------------------------------------------------------------

function withKv<O extends object>(o: O, kv: KvEffects | undefined): O {
  return kv === undefined ? o : { ...o, kv };
}

/**
 * `continue`: the next step gets `payload`, now, after `delay_ms`, or at `run_at` (an RFC
 * 3339 time or a Date); `kv` effects commit with the outcome.
 */
export function continueWith(
  payload?: unknown,
  options: { delay_ms?: number; run_at?: string | Date; kv?: KvEffects } = {},
): T.ContinueOutcome {
  if (options.delay_ms !== undefined && options.run_at !== undefined) {
    throw new TypeError("continueWith: delay_ms and run_at exclude each other");
  }
  const o: T.ContinueOutcome = { outcome: "continue", payload: payload ?? null };
  if (options.delay_ms !== undefined) o.delay_ms = options.delay_ms;
  if (options.run_at !== undefined) {
    o.run_at = options.run_at instanceof Date ? options.run_at.toISOString() : options.run_at;
  }
  return withKv(o, options.kv);
}

/**
 * `continue` once a signal arrives on `key` (or on the first of several keys), or after
 * `timeout_ms` (the next step then gets `signal: {"status": "timeout"}`).
 */
export function waitForSignal(
  key: string | readonly string[],
  options: { timeout_ms: number; payload?: unknown; kv?: KvEffects },
): T.ContinueOutcome {
  if (typeof key !== "string" && key.length === 0) throw new TypeError("waitForSignal: at least one key");
  const wait: T.WaitForSignal =
    typeof key === "string"
      ? { correlation_key: key, timeout_ms: options.timeout_ms }
      : { correlation_keys: [...key], timeout_ms: options.timeout_ms };
  return withKv({ outcome: "continue", payload: options.payload ?? null, wait_for_signal: wait }, options.kv);
}

/**
 * `continue` after starting child runs: the next step runs once they have ended (`wait`:
 * all of them by default, `{mode: "any"}`, `{mode: "count", count}`, with `timeout_ms`),
 * and receives them in `children`.
 */
export function startChildren(
  children: readonly ChildRun[],
  options: { payload?: unknown; wait?: WaitForChildren; kv?: KvEffects } = {},
): T.ContinueOutcome {
  if (children.length === 0) throw new TypeError("startChildren: at least one child");
  const o: T.ContinueOutcome = { outcome: "continue", payload: options.payload ?? null, children: [...children] };
  if (options.wait !== undefined) o.wait_for_children = options.wait;
  return withKv(o, options.kv);
}

/** `succeed`: the run ends succeeded with `result`. */
export function succeed(result?: unknown, options: { kv?: KvEffects } = {}): T.SucceedOutcome {
  return withKv({ outcome: "succeed" as const, result: result ?? null }, options.kv);
}

/** `fail`: the run ends failed with `reason` as its error (permanent; no dead letter, no retry). */
export function fail(reason: string, options: { kv?: KvEffects } = {}): T.FailOutcome {
  return withKv({ outcome: "fail" as const, reason }, options.kv);
}

/** `cancel`: the run ends cancelled with `reason` as its error. */
export function cancel(reason: string, options: { kv?: KvEffects } = {}): T.CancelOutcome {
  return withKv({ outcome: "cancel" as const, reason }, options.kv);
}

/**
 * `pending`: the step stays open after this answer (202) until it is completed with its
 * delivery token (`ctx.complete`), or `timeout_ms` passes, or no heartbeat comes for
 * `heartbeat_timeout_ms`.
 */
export function pending(options: { timeout_ms?: number; heartbeat_timeout_ms?: number } = {}): T.PendingOutcome {
  const o: T.PendingOutcome = { outcome: "pending" };
  if (options.timeout_ms !== undefined) o.timeout_ms = options.timeout_ms;
  if (options.heartbeat_timeout_ms !== undefined) o.heartbeat_timeout_ms = options.heartbeat_timeout_ms;
  return o;
}

/**
 * An error answer instead of an outcome: a transient one is retried with backoff while the
 * step has attempts left (`retry_after_ms` sets the delay, capped by the workflow's
 * `retry_backoff.max_ms`), a permanent one dead-letters the step and fails the run. Return it
 * or throw it from a step handler; `ctx.complete` takes it too.
 */
export class StepError extends Error {
  override readonly name = "StepError";
  readonly retryable: boolean;
  readonly status: number;
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options: { retryable: boolean; status?: number; retry_after_ms?: number }) {
    super(message);
    this.retryable = options.retryable;
    this.status = options.status ?? (options.retryable ? 503 : 422);
    this.retryAfterMs = options.retry_after_ms;
  }

  /** The error answer's body (`{"error": {"message", "retryable"}}`). */
  toJSON(): T.WebhookErrorAnswer {
    return { error: { message: this.message, retryable: this.retryable } };
  }
}

/** A transient error: retried (503 unless `status` says otherwise). */
export function transientError(message: string, options: { retry_after_ms?: number; status?: number } = {}): StepError {
  return new StepError(message, { retryable: true, ...options });
}

/** A permanent error: the step is dead-lettered and the run fails (422 unless `status` says otherwise). */
export function permanentError(message: string, options: { status?: number } = {}): StepError {
  return new StepError(message, { retryable: false, ...options });
}

// ---- the step's context -----------------------------------------------------------------

/** A memo scope of the run (its own, or one step's), reached with the delivery token. */
export class Memo {
  constructor(
    private readonly client: HookflowClient,
    private readonly runId: string,
    private readonly token: string,
    private readonly step?: number,
  ) {}

  /** The memo's value, `found: false` when there is none. */
  async get<V = unknown>(key: string): Promise<{ found: boolean; value: V | undefined }> {
    try {
      const opts = { token: this.token };
      const got =
        this.step === undefined
          ? await this.client.getRunMemo(this.runId, key, opts)
          : await this.client.getStepMemo(this.runId, this.step, key, opts);
      return { found: true, value: got.value as V };
    } catch (e) {
      if (e instanceof HookflowError && e.status === 404) return { found: false, value: undefined };
      throw e;
    }
  }

  /** Stores a value (any JSON, at most 256 KiB); the write is immediate, not part of the outcome. */
  async put(key: string, value: unknown): Promise<void> {
    const opts = { token: this.token };
    if (this.step === undefined) await this.client.putRunMemo(this.runId, key, { value }, opts);
    else await this.client.putStepMemo(this.runId, this.step, key, { value }, opts);
  }

  async delete(key: string): Promise<void> {
    const opts = { token: this.token };
    if (this.step === undefined) await this.client.deleteRunMemo(this.runId, key, opts);
    else await this.client.deleteStepMemo(this.runId, this.step, key, opts);
  }
}

/** What a step handler gets next to the request. */
export class StepContext {
  /** A client of the service that delivered the step (its `memo.url`), authorised by the delivery token. */
  readonly client: HookflowClient;
  /** The run's memos. */
  readonly memo: Memo;
  /** This step's memos (`/steps/{step}/memo/{key}`). */
  readonly stepMemo: Memo;

  constructor(
    readonly request: StepRequest,
    /** The `webhook-id`: the same on every delivery of this step. */
    readonly webhookId: string,
    /** Aborted when hookflow drops the call (a cancel of the run, its deadline). */
    readonly signal: AbortSignal = new AbortController().signal,
  ) {
    const suffix = `/v1/runs/${encodeURIComponent(request.run_id)}`;
    const url = request.memo.url.replace(/\/+$/, "");
    if (!url.endsWith(suffix)) throw new TypeError(`memo.url: does not end with ${suffix}`);
    this.client = new HookflowClient({ baseUrl: url.slice(0, -suffix.length), token: request.memo.token });
    this.memo = new Memo(this.client, request.run_id, request.memo.token);
    this.stepMemo = new Memo(this.client, request.run_id, request.memo.token, request.step);
  }

  /** Ends a step that answered `pending` with an outcome (not `pending`) or a StepError. */
  complete(result: Exclude<StepOutcome, T.PendingOutcome> | StepError): Promise<T.Run> {
    const body: T.CompletionRequest = result instanceof StepError ? result.toJSON() : result;
    return this.client.completeStep(this.request.run_id, this.request.step, body);
  }

  /** Keeps a pending step alive, recording `details`; answers whether the run's cancel was requested. */
  heartbeat(details?: unknown): Promise<T.HeartbeatAnswer> {
    return this.client.heartbeatStep(
      this.request.run_id,
      this.request.step,
      details === undefined ? undefined : { details },
    );
  }
}

// ---- handling a delivery ------------------------------------------------------------------

export type StepResult = StepOutcome | StepError;
export type StepHandler<P = unknown> = (request: StepRequest<P>, ctx: StepContext) => StepResult | Promise<StepResult>;
export type CallbackHandler = (request: CallbackRequest, ctx: { webhookId: string }) => void | Promise<void>;

export interface HandlerOptions {
  /**
   * Receives the terminal callbacks (a delivery whose body has no `memo`: every step request
   * has one); without it they get 404.
   */
  callback?: CallbackHandler;
  /** Seconds a `webhook-timestamp` may be away from now (default 300). */
  toleranceS?: number;
  /** The largest body read (default 16 MiB); a larger one gets 413. */
  maxBodyBytes?: number;
  /**
   * Told of every refused delivery (a WebhookVerificationError: a bad signature, a stale
   * timestamp) and of every error a handler threw (default: console.error).
   */
  onError?: (error: unknown) => void;
}

/** An HTTP answer: what handleDelivery decided. */
export interface WebhookAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const OUTCOMES = new Set(["continue", "succeed", "fail", "cancel", "pending"]);

function json(status: number, obj: unknown, headers: Record<string, string> = {}): WebhookAnswer {
  return { status, headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify(obj) };
}

function errorAnswer(err: StepError): WebhookAnswer {
  const headers: Record<string, string> = {};
  if (err.retryable && err.retryAfterMs !== undefined) {
    headers["Retry-After"] = String(Math.max(0, Math.ceil(err.retryAfterMs / 1000)));
  }
  return json(err.status, err.toJSON(), headers);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Handles one delivery, whatever the HTTP framework: verifies it (unless `secret` is null),
 * tells a step from a callback (a step request has `memo`), runs the handler and answers. A step's answer is its
 * outcome (200, or 202 for `pending`), a StepError's status, or 500 (transient) when the
 * handler throws; a refused signature is 401.
 */
export async function handleDelivery<P = unknown>(
  secret: Secret | null,
  step: StepHandler<P>,
  delivery: { headers: HeaderSource; body: string | Uint8Array; signal?: AbortSignal },
  options: HandlerOptions = {},
): Promise<WebhookAnswer> {
  const report = options.onError ?? ((e: unknown) => console.error("hookflow webhook:", e));
  if (secret !== null) {
    try {
      verifySignature(secret, delivery.headers, delivery.body, { toleranceS: options.toleranceS });
    } catch (e) {
      if (!(e instanceof WebhookVerificationError)) throw e;
      report(e);
      return json(401, { error: { message: e.message, retryable: false } });
    }
  }
  let body: unknown;
  try {
    body = JSON.parse(typeof delivery.body === "string" ? delivery.body : toBuffer(delivery.body).toString("utf8"));
  } catch {
    return json(400, { error: { message: "body is not JSON", retryable: false } });
  }
  const webhookId = header(delivery.headers, "webhook-id") ?? "";
  if (!isObject(body)) {
    return json(400, { error: { message: "body is not a JSON object", retryable: false } });
  }
  // A step request always has `memo`; a callback never has.
  if (!("memo" in body)) {
    if (!options.callback) return json(404, { error: { message: "no callback handler here", retryable: false } });
    try {
      await options.callback(body as CallbackRequest, { webhookId });
      return json(200, {});
    } catch (e) {
      report(e);
      return e instanceof StepError ? errorAnswer(e) : json(500, { error: { message: String(e), retryable: true } });
    }
  }
  if (!isObject(body.memo) || typeof body.step !== "number") {
    return json(400, { error: { message: "not a step request: memo or step missing", retryable: false } });
  }
  const request = body as StepRequest<P>;
  let result: StepResult;
  try {
    result = await step(request, new StepContext(request as StepRequest, webhookId, delivery.signal));
  } catch (e) {
    if (e instanceof StepError) return errorAnswer(e);
    report(e);
    return json(500, { error: { message: e instanceof Error ? e.message : String(e), retryable: true } });
  }
  if (result instanceof StepError) return errorAnswer(result);
  if (!isObject(result) || !OUTCOMES.has(result.outcome as string)) {
    report(new TypeError(`step handler returned no outcome: ${JSON.stringify(result)}`));
    return json(500, { error: { message: "the step handler returned no outcome", retryable: true } });
  }
  return json(result.outcome === "pending" ? 202 : 200, result);
}

/**
 * A node:http request listener for a workflow's `url` (and, with `options.callback`, its
 * `callback_url`):
 *
 *     http.createServer(handler(process.env.WEBHOOK_SECRET!, async (req, ctx) => succeed(req.payload)))
 *
 * `secret` may be null only deliberately (an unsigned workflow): undefined or "" throws.
 */
export function handler<P = unknown>(
  secret: Secret | null,
  step: StepHandler<P>,
  options: HandlerOptions = {},
): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  if (secret === undefined || secret === "" || (Array.isArray(secret) && secret.length === 0)) {
    throw new TypeError("handler: secret is required (null for an unsigned workflow)");
  }
  if (typeof secret === "string") secretKey(secret);
  else if (secret !== null) for (const s of secret) secretKey(s);
  const max = options.maxBodyBytes ?? 16 << 20;
  return (req, res) => {
    const send = (a: WebhookAnswer) => {
      if (res.headersSent || res.destroyed) return;
      res.writeHead(a.status, { ...a.headers, "Content-Length": String(Buffer.byteLength(a.body)) });
      res.end(a.body);
    };
    if (req.method !== "POST") {
      res.setHeader("Allow", "POST");
      send(json(405, { error: { message: "POST only", retryable: false } }));
      return;
    }
    const ctl = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) ctl.abort();
    });
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on("data", (c: Buffer) => {
      if (tooLarge) return;
      size += c.length;
      if (size > max) {
        tooLarge = true;
        send(json(413, { error: { message: `body larger than ${max} bytes`, retryable: false } }));
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      if (tooLarge) return;
      handleDelivery(secret, step, { headers: req.headers, body: Buffer.concat(chunks), signal: ctl.signal }, options)
        .then(send)
        .catch((e: unknown) => {
          (options.onError ?? console.error)(e);
          send(json(500, { error: { message: "internal error", retryable: true } }));
        });
    });
  };
}
