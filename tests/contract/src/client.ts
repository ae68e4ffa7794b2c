// The generated client (openapi-fetch over the openapi-typescript types of
// the spec) with a middleware that checks every answer against the spec and
// records (method, path template, status) for the coverage check.
import fs from "node:fs";
import path from "node:path";
import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { paths } from "../generated/schema";
import { Contract } from "./contract";

export type Api = Client<paths>;

export interface Env {
  baseUrl: string;
  specJson: string;
  specYaml: string;
  routesC: string;
  obsFile: string;
  token: string | undefined;
  readToken: string | undefined;
}

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`environment variable ${name} is required (tests/contract/run.sh sets it)`);
  return v;
}

export function loadEnv(): Env {
  return {
    baseUrl: need("HF_BASE_URL"),
    specJson: need("HF_SPEC_JSON"),
    specYaml: need("HF_SPEC_YAML"),
    routesC: need("HF_ROUTES_C"),
    obsFile: need("HF_OBS_FILE"),
    token: process.env.HF_API_TOKEN || undefined,
    readToken: process.env.HF_READ_TOKEN || undefined,
  };
}

export interface Observation {
  phase: string;
  method: string;
  path: string;
  status: number;
}

/** Thrown (and so failing the call) when an answer contradicts the spec. */
export class ContractViolation extends Error {}

export class Recorder {
  readonly violations: string[] = [];
  count = 0;

  constructor(
    readonly contract: Contract,
    readonly obsFile: string,
    readonly phase: string,
  ) {
    fs.mkdirSync(path.dirname(obsFile), { recursive: true });
  }

  record(method: string, schemaPath: string, status: number): void {
    const o: Observation = { phase: this.phase, method, path: schemaPath, status };
    fs.appendFileSync(this.obsFile, JSON.stringify(o) + "\n");
    this.count++;
  }

  middleware(): Middleware {
    return {
      onResponse: async ({ request, response, schemaPath }) => {
        const body = await response.clone().text();
        this.record(request.method, schemaPath, response.status);
        const problems = this.contract.checkResponse(
          request.method,
          schemaPath,
          response.status,
          response.headers,
          body,
        );
        if (problems.length > 0) {
          const msg = `${request.method} ${schemaPath} -> ${response.status} (${request.url}) contradicts the spec:\n  ${problems.join("\n  ")}`;
          this.violations.push(msg);
          throw new ContractViolation(msg);
        }
        return undefined;
      },
    };
  }
}

/** A client of the generated types; `token` becomes the default bearer. */
export function makeClient(env: Env, rec: Recorder, token?: string): Api {
  const client = createClient<paths>({
    baseUrl: env.baseUrl,
    headers: token ? { Authorization: `Bearer ${token}` } : undefined,
  });
  client.use(rec.middleware());
  return client;
}

/** A body larger than the server's default HOOKFLOW_MAX_BODY_BYTES (1 MiB). */
export const TOO_LARGE = JSON.stringify({ padding: "x".repeat((1 << 20) + 16) });
/** Sends the body as it is (for 415 and malformed-JSON requests). */
export const rawBody = (text: string) => () => text;
/**
 * Sends the body as a stream (chunked, no Content-Length), so the server
 * reads all of it before it answers. (With a Content-Length over the limit it
 * answers at once and closes the connection with the body unread: see the
 * todo test of main.test.ts.)
 */
export const streamedBody = (text: string) => () =>
  new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(new TextEncoder().encode(text));
      c.close();
    },
  });
