// The end of the contract run: every status documented for an operation was
// answered by the server at least once in the scenario (main, auth and
// dbdown phases), so the document claims nothing the server does not do.
import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import type { Observation } from "./client";
import { Contract } from "./contract";

const specJson = process.env.HF_SPEC_JSON;
const obsFile = process.env.HF_OBS_FILE;
if (!specJson || !obsFile) throw new Error("HF_SPEC_JSON and HF_OBS_FILE are required (run.sh sets them)");
const contract = new Contract(specJson);

test("every documented status of every operation was observed", () => {
  const seen = new Map<string, Set<string>>();
  const lines = fs.readFileSync(obsFile, "utf8").split("\n").filter(Boolean);
  for (const l of lines) {
    const o = JSON.parse(l) as Observation;
    const k = `${o.method} ${o.path} ${o.status}`;
    if (!seen.has(k)) seen.set(k, new Set());
    seen.get(k)!.add(o.phase);
  }
  const missing: string[] = [];
  const undocumented: string[] = [];
  let documented = 0;
  for (const { method, path } of contract.operations())
    for (const st of contract.statuses(method, path)) {
      documented++;
      if (!seen.has(`${method} ${path} ${st}`)) missing.push(`${method} ${path} ${st}`);
    }
  for (const k of seen.keys()) {
    const [method, path, st] = k.split(" ");
    if (!contract.statuses(method, path).includes(Number(st))) undocumented.push(k);
  }
  console.log(`# coverage: ${documented - missing.length}/${documented} documented statuses observed in ${lines.length} answers`);
  assert.deepEqual(missing, [], "documented statuses the scenario never saw the server answer");
  assert.deepEqual(undocumented, [], "statuses the server answered that the spec does not document");
});
