// Small helpers of the scenarios: status assertions and waiting on
// conditions with deadlines.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";

export interface Answer {
  response: Response;
  data?: any;
  error?: any;
}

/** Asserts the status of an answer, showing its body when it differs. */
export function status<T extends Answer>(r: T, want: number, what = ""): T {
  if (r.response.status !== want)
    assert.fail(
      `${what ? what + ": " : ""}${r.response.url} answered ${r.response.status}, want ${want}: ${JSON.stringify(r.error ?? r.data)}`,
    );
  return r;
}

/** Asserts an error answer: status and error code. Returns the message. */
export function error(r: Answer, want: number, code: string, what = ""): string {
  status(r, want, what);
  assert.equal(r.error?.error?.code, code, `${what}: error code`);
  return r.error.error.message as string;
}

/** Polls `probe` until it returns a value other than undefined, within `ms`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 15000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${ms} ms (last: ${JSON.stringify(last)})`);
    last = v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sha256hex = (s: string) => createHash("sha256").update(s, "utf8").digest("hex");

export const TIMESTAMP = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$/;
