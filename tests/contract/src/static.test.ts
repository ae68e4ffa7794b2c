// Checks of the document itself, before any server runs: it covers every
// route of handlers/routes.c (and nothing else), the schemas of what the
// server sends are closed, and every operation has a sample request for the
// 401 and 503 sweeps.
import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import path from "node:path";
import { Contract, handlersOfC, keyListsOfC, queryParamsOfHandler, requestKeySets, routesOfC, routesOfSpec } from "./contract";
import { SAMPLES } from "./samples";

const specJson = process.env.HF_SPEC_JSON;
const routesPath = process.env.HF_ROUTES_C;
if (!specJson || !routesPath) throw new Error("HF_SPEC_JSON and HF_ROUTES_C are required (run.sh sets them)");
const contract = new Contract(specJson);

test("the spec has exactly the routes of handlers/routes.c", () => {
  const inC = routesOfC(fs.readFileSync(routesPath, "utf8"));
  assert.ok(inC.length > 20, `routes found in ${routesPath}: ${inC.length}`);
  const inSpec = routesOfSpec(contract);
  assert.deepEqual(
    inC.filter((r) => !inSpec.includes(r)),
    [],
    "routes of the server missing from openapi/openapi.yaml",
  );
  assert.deepEqual(
    inSpec.filter((r) => !inC.includes(r)),
    [],
    "operations of openapi/openapi.yaml the server does not route",
  );
});

test("every operation documents exactly the query parameters its C handler reads", () => {
  const dir = path.dirname(routesPath);
  const sources = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".c"))
    .map((f) => "\n" + fs.readFileSync(path.join(dir, f), "utf8"))
    .join("\n");
  const handlers = handlersOfC(fs.readFileSync(routesPath, "utf8"));
  const problems: string[] = [];
  for (const { method, path: p, op } of contract.operations()) {
    const fn = handlers.get(`${method} ${p.replace(/\{[^}]+\}/g, "{}")}`);
    if (!fn) continue; // the route test reports it
    const inC = queryParamsOfHandler(sources, fn);
    if (inC === undefined) {
      problems.push(`${method} ${p}: handler ${fn} not found in ${dir}`);
      continue;
    }
    const params = [...(contract.doc.paths[p].parameters ?? []), ...(op.parameters ?? [])].map((x: unknown) => contract.deref(x));
    const inSpec = params.filter((x: any) => x.in === "query").map((x: any) => x.name as string).sort();
    if (JSON.stringify(inC) !== JSON.stringify(inSpec))
      problems.push(`${method} ${p}: handler ${fn} reads [${inC}], the spec documents [${inSpec}]`);
  }
  assert.deepEqual(problems, []);
});

test("the request body schemas have exactly the fields the C handlers accept", () => {
  const dir = path.dirname(routesPath);
  const sources = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".c"))
    .map((f) => fs.readFileSync(path.join(dir, f), "utf8"))
    .join("\n");
  const inC = keyListsOfC(sources).map((k) => k.join(","));
  const inSpec = requestKeySets(contract);
  assert.ok(inC.length >= 8, `key lists found in ${dir}: ${inC.length}`);
  assert.deepEqual(
    inSpec.filter((s) => !inC.includes(s.keys.join(","))).map((s) => `${s.where}: [${s.keys}]`),
    [],
    "request schemas whose fields no key list of handlers/*.c accepts",
  );
  const specSets = inSpec.map((s) => s.keys.join(","));
  assert.deepEqual(
    inC.filter((k) => !specSets.includes(k)).map((k) => `[${k}]`),
    [],
    "key lists of handlers/*.c that no request schema describes",
  );
});

test("every object schema of a response or webhook request is closed (additionalProperties: false)", () => {
  assert.deepEqual(contract.openObjectSchemas(), []);
});

test("every response schema, header schema and webhook schema (requests and answers) compiles (ajv strict mode)", () => {
  let n = 0;
  for (const { method, path, op } of contract.operations())
    for (const [st, r] of Object.entries<any>(op.responses)) {
      const resp = contract.deref(r);
      for (const [ct, media] of Object.entries<any>(resp.content ?? {}))
        if (media.schema) {
          contract.validator(JSON.stringify(media.schema), media.schema);
          void method, path, st, ct;
          n++;
        }
    }
  for (const [name, hook] of Object.entries<any>(contract.doc.webhooks ?? {})) {
    contract.checkWebhookBody(name, {});
    n++;
    // The answers the scenario's webhook checks its own outcomes against.
    for (const st of Object.keys(hook.post?.responses ?? {}).filter((s) => /^[1-5][0-9][0-9]$/.test(s))) {
      contract.checkWebhookAnswer(name, Number(st), {});
      n++;
    }
  }
  assert.ok(n > 50, `schemas compiled: ${n}`);
});

test("every operation has a sample request (for the 401 and 503 sweeps)", () => {
  const ops = contract.operations().map((o) => `${o.method} ${o.path}`);
  assert.deepEqual(ops.filter((o) => !(o in SAMPLES)), [], "operations without a sample");
  assert.deepEqual(Object.keys(SAMPLES).filter((k) => !ops.includes(k)), [], "samples of no operation");
});

test("every error response documents a status the error code maps to", () => {
  const codeStatus: Record<string, number> = {
    invalid_argument: 400, unauthenticated: 401, forbidden: 403, not_found: 404,
    input_mismatch: 409, already_terminal: 409, run_active: 409, group_mismatch: 409,
    group_active: 409, workflow_in_use: 409, already_completed: 409, stale_attempt: 409,
    run_cancelled: 409, payload_too_large: 413,
    unsupported_media_type: 415, unavailable: 503,
  };
  const problems: string[] = [];
  for (const { method, path, op } of contract.operations())
    for (const [st, r] of Object.entries<any>(op.responses)) {
      const schema = contract.deref(r).content?.["application/json"]?.schema;
      const target = schema?.$ref ? contract.deref(schema) : schema;
      const c = target?.properties?.error?.properties?.code;
      const codes: string[] = c?.const !== undefined ? [c.const] : (c?.enum ?? []);
      for (const code of codes)
        if (codeStatus[code] !== Number(st))
          problems.push(`${method} ${path} ${st}: error code ${code} is sent with ${codeStatus[code]}`);
    }
  assert.deepEqual(problems, []);
});
