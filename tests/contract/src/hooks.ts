// The scenario's webhook: a Node HTTP server that receives the steps and the
// terminal callbacks, verifies each one with the `standardwebhooks` package
// (an implementation independent of hookflow's) and against the spec's
// webhook schemas, and answers from a script carried in the run's payload.
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import type { components } from "../generated/schema";
import { Contract } from "./contract";

type StepRequest = components["schemas"]["StepRequest"];
type CallbackRequest = components["schemas"]["CallbackRequest"];
type KvEffects = components["schemas"]["KvEffects"];
export type StepOutcome = components["schemas"]["StepOutcome"];
export type ChildRun = components["schemas"]["ChildRun"];
export type WaitForChildren = components["schemas"]["WaitForChildren"];

/** What the webhook does for one step. */
export type Action =
  | {
      do: "continue";
      delay_ms?: number;
      run_at?: string;
      // a wait on `key`, or on the first signal on any of `keys`
      wait?: { key?: string; keys?: string[]; timeout_ms: number };
      children?: ChildRun[];
      wait_children?: WaitForChildren;
      kv?: KvEffects;
      note?: unknown;
    }
  | { do: "succeed"; result?: unknown; kv?: KvEffects }
  | { do: "fail"; reason: string; kv?: KvEffects }
  | { do: "cancel"; reason: string; kv?: KvEffects }
  | { do: "http"; status: number; body?: string; headers?: Record<string, string> }
  | { do: "pending"; timeout_ms?: number; heartbeat_timeout_ms?: number }
  | { do: "hang" }
  | { do: "byAttempt"; list: Action[] }
  | { do: "byGeneration"; list: Action[] };

/** A run's input and every step's payload: a tag and the script, one action per step. */
export interface Script {
  t: string;
  s: Action[];
  from?: number;
  note?: unknown;
}

export interface Delivery {
  kind: "step" | "callback";
  path: string;
  id: string;
  headers: http.IncomingHttpHeaders;
  raw: string;
  body: any;
  answered?: number;
  aborted: boolean;
}

export interface StepDelivery extends Delivery {
  kind: "step";
  body: StepRequest;
}

export interface CallbackDelivery extends Delivery {
  kind: "callback";
  body: CallbackRequest;
}

type Waiter = { pred: (d: Delivery) => boolean; resolve: (d: Delivery) => void };

export class HookServer {
  readonly deliveries: Delivery[] = [];
  readonly failures: string[] = [];
  private readonly waiters: Waiter[] = [];
  private readonly abortWaiters: Waiter[] = [];
  private readonly hanging = new Set<http.ServerResponse>();
  private readonly callbackSeen = new Map<string, number>();
  private readonly verifier: Webhook;
  private server!: http.Server;
  base = "";

  constructor(
    private readonly contract: Contract,
    readonly secret: string,
  ) {
    this.verifier = new Webhook(secret);
  }

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => this.handle(req, res, Buffer.concat(chunks).toString("utf8")));
    });
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    const port = (this.server.address() as AddressInfo).port;
    this.base = `http://127.0.0.1:${port}`;
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  url(p: string): string {
    return `${this.base}${p}`;
  }

  private fail(msg: string): void {
    this.failures.push(msg);
    process.stderr.write(`webhook: ${msg}\n`);
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse, raw: string): void {
    const path = req.url ?? "";
    const kind: "step" | "callback" | undefined = path.startsWith("/step")
      ? "step"
      : path.startsWith("/callback")
        ? "callback"
        : undefined;
    const id = String(req.headers["webhook-id"] ?? "");
    let body: any = undefined;
    const where = `${req.method} ${path} webhook-id=${id}`;
    try {
      body = JSON.parse(raw);
    } catch {
      this.fail(`${where}: body is not JSON: ${raw.slice(0, 200)}`);
    }
    const d: Delivery = { kind: kind ?? "step", path, id, headers: req.headers, raw, body, aborted: false };
    if (!kind || req.method !== "POST") this.fail(`${where}: unexpected request`);
    // Independent signature check (Standard Webhooks): throws on any mismatch,
    // a missing header or a timestamp out of tolerance.
    try {
      this.verifier.verify(raw, {
        "webhook-id": id,
        "webhook-timestamp": String(req.headers["webhook-timestamp"] ?? ""),
        "webhook-signature": String(req.headers["webhook-signature"] ?? ""),
      });
    } catch (e) {
      this.fail(`${where}: signature verification failed: ${(e as Error).message}`);
    }
    if (!id) this.fail(`${where}: no webhook-id`);
    if (!/^[0-9]+$/.test(String(req.headers["webhook-timestamp"] ?? "")))
      this.fail(`${where}: bad webhook-timestamp ${req.headers["webhook-timestamp"]}`);
    if (!/^hookflow\//.test(String(req.headers["user-agent"] ?? "")))
      this.fail(`${where}: bad user-agent ${req.headers["user-agent"]}`);
    if (!/^application\/json\b/.test(String(req.headers["content-type"] ?? "")))
      this.fail(`${where}: bad content-type ${req.headers["content-type"]}`);
    if (kind) {
      const problems = this.contract.checkWebhookHeaders(kind, req.headers);
      if (problems.length) this.fail(`${where}: headers contradict webhooks.${kind}: ${problems.join("; ")}`);
    }
    if (kind && body !== undefined) {
      const problems = this.contract.checkWebhookBody(kind, body);
      if (problems.length) this.fail(`${where}: body contradicts webhooks.${kind}: ${problems.join("; ")} body=${raw.slice(0, 400)}`);
    }
    this.deliveries.push(d);
    res.on("close", () => {
      if (!res.writableFinished) {
        d.aborted = true;
        this.hanging.delete(res);
        this.fire(this.abortWaiters, d);
      }
    });
    if (kind === "callback") this.answerCallback(d, res);
    else if (kind === "step" && body) this.answerStep(d as StepDelivery, res);
    else this.send(d, res, 400, JSON.stringify({ error: { message: "unexpected", retryable: false } }));
    this.fire(this.waiters, d);
  }

  private fire(list: Waiter[], d: Delivery): void {
    for (let i = list.length - 1; i >= 0; i--)
      if (list[i].pred(d)) {
        const [w] = list.splice(i, 1);
        w.resolve(d);
      }
  }

  private send(d: Delivery, res: http.ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
    d.answered = status;
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(body);
  }

  private answerCallback(d: Delivery, res: http.ServerResponse): void {
    // /callback/ok acknowledges; /callback/flaky refuses (permanently) the
    // first delivery of each callback and acknowledges the next ones.
    const n = (this.callbackSeen.get(d.id) ?? 0) + 1;
    this.callbackSeen.set(d.id, n);
    if (d.path === "/callback/flaky" && n === 1)
      this.send(d, res, 400, JSON.stringify({ error: { message: "not today", retryable: false } }));
    else this.send(d, res, 204, "");
  }

  private answerStep(d: StepDelivery, res: http.ServerResponse): void {
    const req = d.body;
    const payload = req.payload as Script | null;
    if (!payload || !Array.isArray(payload.s) || payload.s[req.step] === undefined) {
      this.fail(`step ${req.run_id}/${req.step}: payload has no script for this step: ${d.raw.slice(0, 200)}`);
      this.send(d, res, 400, JSON.stringify({ error: { message: "no script", retryable: false } }));
      return;
    }
    let a: Action = payload.s[req.step];
    while (a.do === "byAttempt" || a.do === "byGeneration") {
      const i = a.do === "byAttempt" ? req.attempt - 1 : req.generation - 1;
      a = a.list[Math.min(i, a.list.length - 1)];
    }
    let outcome: StepOutcome;
    switch (a.do) {
      case "hang":
        this.hanging.add(res);
        d.answered = 0;
        return;
      case "http":
        this.send(d, res, a.status, a.body ?? "", a.headers);
        return;
      case "continue": {
        const next: Script = { t: payload.t, s: payload.s, from: req.step };
        if (a.note !== undefined) next.note = a.note;
        outcome = { outcome: "continue", payload: next };
        if (a.delay_ms !== undefined) outcome.delay_ms = a.delay_ms;
        if (a.run_at !== undefined) outcome.run_at = a.run_at;
        if (a.wait)
          outcome.wait_for_signal =
            a.wait.keys !== undefined
              ? { correlation_keys: a.wait.keys, timeout_ms: a.wait.timeout_ms }
              : { correlation_key: a.wait.key!, timeout_ms: a.wait.timeout_ms };
        if (a.children) outcome.children = a.children;
        if (a.wait_children) outcome.wait_for_children = a.wait_children;
        if (a.kv) outcome.kv = a.kv;
        break;
      }
      case "succeed":
        outcome = { outcome: "succeed", result: a.result ?? null };
        if (a.kv) outcome.kv = a.kv;
        break;
      case "fail":
      case "cancel":
        outcome = a.do === "fail" ? { outcome: "fail", reason: a.reason } : { outcome: "cancel", reason: a.reason };
        if (a.kv) outcome.kv = a.kv;
        break;
      case "pending":
        outcome = { outcome: "pending" };
        if (a.timeout_ms !== undefined) outcome.timeout_ms = a.timeout_ms;
        if (a.heartbeat_timeout_ms !== undefined) outcome.heartbeat_timeout_ms = a.heartbeat_timeout_ms;
        break;
    }
    // What the webhook answers must itself be a documented outcome (pending
    // with 202, as the spec shows it).
    const code = outcome.outcome === "pending" ? 202 : 200;
    let problems: string[];
    try {
      problems = this.contract.checkWebhookAnswer("step", code, outcome);
    } catch (e) {
      // A schema that does not compile: say so rather than leave the call unanswered.
      problems = [`cannot check it: ${(e as Error).message}`];
    }
    if (problems.length) this.fail(`step ${req.run_id}/${req.step}: our outcome contradicts the spec: ${problems.join("; ")}`);
    this.send(d, res, code, JSON.stringify(outcome));
  }

  /** The first delivery (past or future) matching `pred`, within `ms`. */
  waitFor<T extends Delivery = Delivery>(what: string, pred: (d: Delivery) => boolean, ms = 15000): Promise<T> {
    const found = this.deliveries.find(pred);
    if (found) return Promise.resolve(found as T);
    return this.wait(this.waiters, what, pred, ms) as Promise<T>;
  }

  /** Resolves when a hanging delivery matching `pred` is aborted by hookflow. */
  waitAborted(what: string, pred: (d: Delivery) => boolean, ms = 15000): Promise<Delivery> {
    const found = this.deliveries.find((d) => d.aborted && pred(d));
    if (found) return Promise.resolve(found);
    return this.wait(this.abortWaiters, what, pred, ms);
  }

  private wait(list: Waiter[], what: string, pred: (d: Delivery) => boolean, ms: number): Promise<Delivery> {
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        pred,
        resolve: (d) => {
          clearTimeout(timer);
          resolve(d);
        },
      };
      const timer = setTimeout(() => {
        const i = list.indexOf(w);
        if (i >= 0) list.splice(i, 1);
        reject(new Error(`webhook: no ${what} within ${ms} ms`));
      }, ms);
      list.push(w);
    });
  }

  steps(runId: string): StepDelivery[] {
    return this.deliveries.filter((d) => d.kind === "step" && d.body?.run_id === runId) as StepDelivery[];
  }

  step(runId: string, step: number, ms?: number): Promise<StepDelivery> {
    return this.waitFor<StepDelivery>(
      `step ${step} of ${runId}`,
      (d) => d.kind === "step" && d.body?.run_id === runId && d.body?.step === step,
      ms,
    );
  }

  callback(runId: string, generation = 1, ms?: number): Promise<CallbackDelivery> {
    return this.waitFor<CallbackDelivery>(
      `callback of ${runId} generation ${generation}`,
      (d) => d.kind === "callback" && d.body?.run_id === runId && d.body?.generation === generation,
      ms,
    );
  }
}

/** A workflow signing secret: whsec_ + standard base64 of 32 random bytes. */
export function newSecret(): string {
  return "whsec_" + randomBytes(32).toString("base64");
}

export const script = (t: string, ...s: Action[]): Script => ({ t, s });
