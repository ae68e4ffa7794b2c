// The client of hookflow's REST API: one method per operation (generated into
// ./generated/operations.ts from openapi/openapi.yaml), over fetch, with typed
// bodies and answers, errors as HookflowError, long-poll waits and paging.
import { Operations, type AnswerKind, type RequestOptions } from "./generated/operations";
import type * as T from "./generated/types";

export type { RequestOptions } from "./generated/operations";

export interface ClientOptions {
  /** The service's base URL (default http://127.0.0.1:8080, hookflow's default listen address). */
  baseUrl?: string;
  /** An API token (`HOOKFLOW_API_TOKENS`), sent as `Authorization: Bearer <token>`. */
  token?: string;
  /**
   * How long one call may take before it fails with code `timeout` (default 30000 ms);
   * a long-poll (`wait_ms`) gets its wait on top.
   */
  timeoutMs?: number;
  /** Headers sent with every call. */
  headers?: Record<string, string>;
  /** The fetch implementation (default: the global fetch of Node 20). */
  fetch?: typeof fetch;
}

/**
 * An error answer of the API (`{"error": {"code", "message"}}` with its HTTP status), or no
 * answer at all: status 0 with code `timeout`, `aborted` or `network_error`.
 */
export class HookflowError extends Error {
  override readonly name = "HookflowError";
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The API's error code (`invalid_argument`, `not_found`, `input_mismatch`, ...). */
  readonly code: string;
  /** The field named by an `invalid_argument` message (`"workflow: required"` names `workflow`); else null. */
  readonly field: string | null;
  /** The answer's X-Request-Id (quote it when asking about a failure). */
  readonly requestId: string | null;
  /** The decoded error body, or the text of a body that was not JSON. */
  readonly body: unknown;

  constructor(
    status: number,
    code: string,
    message: string,
    init: { requestId?: string | null; body?: unknown; cause?: unknown } = {},
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = status;
    this.code = code;
    this.requestId = init.requestId ?? null;
    this.body = init.body;
    const m = code === "invalid_argument" ? /^([A-Za-z_][A-Za-z0-9_.[\]-]*): /.exec(message) : null;
    this.field = m ? m[1] : null;
  }
}

/** The statuses a run ends in. */
export const TERMINAL_STATUSES: readonly T.RunStatus[] = ["succeeded", "failed", "cancelled"];

/** A page of a list: its items under some key, and the cursor of the next page. */
export type Page<K extends string, I> = { next_cursor: string | null } & { [P in K]: I[] };

const DEFAULT_BASE_URL = "http://127.0.0.1:8080";
// The longest wait_ms of one call of waitForRun/waitForGroup: under the API's 300000, and
// under the 300 s that Node's fetch (undici) waits for an answer's headers.
const MAX_WAIT_MS = 240000;

export class HookflowClient extends Operations {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly timeoutMs: number;
  private readonly headers: Record<string, string>;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions = {}) {
    super();
    this.baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30000;
    this.headers = { ...(options.headers ?? {}) };
    this.fetchImpl = options.fetch ?? fetch;
  }

  /**
   * Waits for a run to end: long-polls `GET /v1/runs/{run_id}?wait_ms=` (at most 4 minutes a
   * call) until it is terminal or `timeoutMs` (default 60000) has passed. Answers the run as
   * it stands then: check its `status`.
   */
  async waitForRun(runId: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<T.Run> {
    const deadline = Date.now() + (opts.timeoutMs ?? 60000);
    for (;;) {
      const left = Math.max(0, Math.min(deadline - Date.now(), MAX_WAIT_MS));
      const run = await this.getRun(runId, { wait_ms: left }, { signal: opts.signal });
      if (TERMINAL_STATUSES.includes(run.status) || Date.now() >= deadline) return run;
    }
  }

  /**
   * Waits for every member of a group to end (`GET /v1/groups/{group_id}?wait_ms=`), at most
   * `timeoutMs` (default 60000); answers the group (its first page of members) as it stands.
   */
  async waitForGroup(
    groupId: string,
    opts: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<T.Group> {
    const deadline = Date.now() + (opts.timeoutMs ?? 60000);
    for (;;) {
      const left = Math.max(0, Math.min(deadline - Date.now(), MAX_WAIT_MS));
      const group = await this.getGroup(groupId, { wait_ms: left }, { signal: opts.signal });
      if (group.pending + group.running === 0 || Date.now() >= deadline) return group;
    }
  }

  /**
   * Every item of a paged list, following `next_cursor` to the end:
   *
   *     for await (const run of client.paginate((cursor) => client.listRuns({ workflow, cursor }), "runs"))
   */
  async *paginate<K extends string, I>(
    fetchPage: (cursor: string | undefined) => Promise<Page<K, I>>,
    key: K,
  ): AsyncGenerator<I, void, undefined> {
    let cursor: string | undefined;
    for (;;) {
      const page = await fetchPage(cursor);
      yield* page[key];
      if (page.next_cursor === null || page.next_cursor === undefined) return;
      cursor = page.next_cursor;
    }
  }

  /** Builds the URL of an operation: its path parameters percent-encoded, its query appended. */
  url(path: string, pathParams: Record<string, string | number> = {}, query?: Record<string, unknown>): string {
    const p = path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const v = pathParams[name];
      if (v === undefined || v === null || v === "") throw new TypeError(`${name}: required`);
      return encodeURIComponent(String(v));
    });
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v === undefined || v === null) continue;
      qs.append(k, String(v));
    }
    const s = qs.toString();
    return `${this.baseUrl}${p}${s ? `?${s}` : ""}`;
  }

  protected async call(
    method: string,
    path: string,
    pathParams: Record<string, string | number>,
    query: Record<string, unknown> | undefined,
    body: unknown,
    answer: AnswerKind,
    options: RequestOptions | undefined,
  ): Promise<unknown> {
    const url = this.url(path, pathParams, query);
    const headers: Record<string, string> = { Accept: answer === "json" ? "application/json" : "*/*", ...this.headers };
    const token = options?.token ?? this.token;
    if (token) headers.Authorization = `Bearer ${token}`;
    if (options?.requestId) headers["X-Request-Id"] = options.requestId;
    let payload: string | undefined;
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      payload = JSON.stringify(body);
    }
    const waitMs = typeof query?.wait_ms === "number" ? query.wait_ms : 0;
    const timeoutMs = (options?.timeoutMs ?? this.timeoutMs) + waitMs;

    // One controller for the timeout and the caller's signal.
    const ctl = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ctl.abort();
    }, timeoutMs);
    const onAbort = () => ctl.abort();
    options?.signal?.addEventListener("abort", onAbort, { once: true });
    if (options?.signal?.aborted) ctl.abort();
    try {
      let res: Response;
      let text: string;
      try {
        res = await this.fetchImpl(url, { method, headers, body: payload, signal: ctl.signal });
        text = await res.text();
      } catch (e) {
        if (timedOut) throw new HookflowError(0, "timeout", `${method} ${path}: no answer within ${timeoutMs} ms`, { cause: e });
        if (ctl.signal.aborted) throw new HookflowError(0, "aborted", `${method} ${path}: aborted`, { cause: e });
        throw new HookflowError(0, "network_error", `${method} ${path}: ${(e as Error).message}`, { cause: e });
      }
      const requestId = res.headers.get("x-request-id");
      if (res.status < 200 || res.status > 299) throw errorOf(res.status, text, requestId);
      if (answer === "none") return undefined;
      if (answer === "text") return text;
      if (text === "") return undefined;
      try {
        return JSON.parse(text);
      } catch (e) {
        throw new HookflowError(res.status, "invalid_answer", `${method} ${path}: the answer is not JSON`, {
          requestId,
          body: text,
          cause: e,
        });
      }
    } finally {
      clearTimeout(timer);
      options?.signal?.removeEventListener("abort", onAbort);
    }
  }
}

function errorOf(status: number, text: string, requestId: string | null): HookflowError {
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: a proxy's page, say; keep the text
  }
  const err = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (err && typeof err.code === "string" && typeof err.message === "string") {
    return new HookflowError(status, err.code, err.message, { requestId, body });
  }
  const snippet = text.length > 200 ? `${text.slice(0, 200)}...` : text;
  return new HookflowError(status, `http_${status}`, `HTTP ${status}: ${snippet}`, { requestId, body });
}
