// What the tests share: the service under test (tests/sdk/run.sh starts it and sets
// HF_BASE_URL, HF_TOKEN, HF_READ_TOKEN), unique names, and a webhook server built on
// the SDK's own handler, which routes each step to the function registered for its
// workflow and records every delivery.
import crypto from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import {
  HookflowClient,
  handler,
  type CallbackRequest,
  type Secret,
  type StepContext,
  type StepHandler,
  type StepRequest,
  type StepResult,
} from "@hookflow/sdk";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the tests with tests/sdk/run.sh (make sdk-test)`);
  return v;
}

export const env = {
  get baseUrl() {
    return need("HF_BASE_URL");
  },
  get token() {
    return need("HF_TOKEN");
  },
  get readToken() {
    return need("HF_READ_TOKEN");
  },
};

export function client(token: string | undefined = env.token): HookflowClient {
  return new HookflowClient({ baseUrl: env.baseUrl, token });
}

const tag = crypto.randomBytes(4).toString("hex");
let seq = 0;
/** A name no other test (nor an earlier run against the same database) uses. */
export function unique(prefix: string): string {
  seq += 1;
  return `ts-${prefix}-${tag}-${seq}`;
}

export function newSecret(): string {
  return `whsec_${crypto.randomBytes(24).toString("base64")}`;
}

/** Waits for a condition, failing after `timeoutMs`; woken by `poke()` instead of polling. */
export class Waiters {
  private readonly waiting = new Set<() => void>();

  poke(): void {
    for (const w of [...this.waiting]) w();
  }

  async until<V>(what: string, probe: () => V | undefined | false, timeoutMs = 20000): Promise<V> {
    const first = probe();
    if (first) return first;
    return new Promise<V>((resolve, reject) => {
      const check = () => {
        const v = probe();
        if (v) {
          this.waiting.delete(check);
          clearTimeout(timer);
          resolve(v);
        }
      };
      const timer = setTimeout(() => {
        this.waiting.delete(check);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.waiting.add(check);
    });
  }
}

export interface StepSeen {
  request: StepRequest;
  ctx: StepContext;
  answered?: StepResult;
}

/** The webhook: one server, the SDK's handler, one step function per workflow. */
export class Hooks {
  readonly steps: StepSeen[] = [];
  readonly callbacks: CallbackRequest[] = [];
  readonly waiters = new Waiters();
  private readonly routes = new Map<string, StepHandler>();
  private server!: http.Server;
  base = "";

  constructor(readonly secret: Secret | null) {}

  async start(): Promise<void> {
    const hook = handler(
      this.secret,
      async (request, ctx) => {
        const seen: StepSeen = { request, ctx };
        this.steps.push(seen);
        const fn = this.routes.get(request.workflow);
        try {
          seen.answered = fn ? await fn(request, ctx) : { outcome: "fail", reason: "no route" };
          return seen.answered;
        } finally {
          this.waiters.poke();
        }
      },
      {
        callback: (request) => {
          this.callbacks.push(request);
          this.waiters.poke();
        },
        onError: () => {},
      },
    );
    this.server = http.createServer(hook);
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  route(workflow: string, fn: StepHandler): void {
    this.routes.set(workflow, fn);
  }

  stepsOf(runId: string): StepSeen[] {
    return this.steps.filter((s) => s.request.run_id === runId);
  }

  callbackOf(runId: string): Promise<CallbackRequest> {
    return this.waiters.until(`the callback of ${runId}`, () => this.callbacks.find((c) => c.run_id === runId));
  }

  stepOf(runId: string, step: number, attempt = 1): Promise<StepSeen> {
    return this.waiters.until(`step ${step} attempt ${attempt} of ${runId}`, () =>
      this.steps.find(
        (s) => s.request.run_id === runId && s.request.step === step && s.request.attempt === attempt && s.answered,
      ),
    );
  }
}

/** Polls `probe` (an API read, say) every 50 ms until it answers a truthy value, failing after `timeoutMs`. */
export async function eventually<V>(what: string, probe: () => Promise<V | undefined | false>, timeoutMs = 20000): Promise<V> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
