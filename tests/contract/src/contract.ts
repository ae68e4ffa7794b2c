// The contract: the bundled OpenAPI document (generated/openapi.json, made
// from openapi/openapi.yaml by `redocly bundle`), compiled into ajv
// validators for every response the server sends and every webhook request
// it makes, plus the static checks of the document itself.
import fs from "node:fs";
import Ajv2020 from "ajv/dist/2020";
import type { ValidateFunction } from "ajv";
import addFormats from "ajv-formats";

export const HTTP_METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

type Obj = Record<string, any>;

const SCHEMA_PREFIX = "#/components/schemas/";
const ROOT_ID = "hookflow";

/** Deep copy of `v` with component schema refs pointing into the ajv root schema. */
function rewriteRefs(v: unknown): any {
  if (Array.isArray(v)) return v.map(rewriteRefs);
  if (v !== null && typeof v === "object") {
    const out: Obj = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === "$ref" && typeof x === "string" && x.startsWith(SCHEMA_PREFIX))
        out[k] = `${ROOT_ID}#/$defs/${x.slice(SCHEMA_PREFIX.length)}`;
      else out[k] = rewriteRefs(x);
    }
    return out;
  }
  return v;
}

export interface Problem {
  where: string;
  what: string;
}

export class Contract {
  readonly doc: Obj;
  private readonly ajv: Ajv2020;
  private readonly cache = new Map<string, ValidateFunction>();

  constructor(path: string) {
    this.doc = JSON.parse(fs.readFileSync(path, "utf8"));
    // Strict mode: an unknown keyword or a misspelt one in the spec is an error.
    this.ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
    addFormats(this.ajv);
    this.ajv.addSchema({ $id: ROOT_ID, $defs: rewriteRefs(this.doc.components?.schemas ?? {}) });
  }

  /** Follows a local `$ref` (responses, parameters, headers, request bodies). */
  deref<T = Obj>(v: any): T {
    let cur = v;
    for (let i = 0; cur && typeof cur === "object" && typeof cur.$ref === "string"; i++) {
      if (i > 20) throw new Error(`ref loop at ${v.$ref}`);
      const ref: string = cur.$ref;
      if (!ref.startsWith("#/")) throw new Error(`non-local ref ${ref}`);
      cur = ref
        .slice(2)
        .split("/")
        .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
        .reduce((o: any, k) => (o == null ? undefined : o[k]), this.doc);
      if (cur === undefined) throw new Error(`dangling ref ${ref}`);
    }
    return cur as T;
  }

  /** A validator of `schema` (a spec schema object), cached under `key`. */
  validator(key: string, schema: unknown): ValidateFunction {
    let v = this.cache.get(key);
    if (!v) {
      v = this.ajv.compile(rewriteRefs(schema));
      this.cache.set(key, v);
    }
    return v;
  }

  /** Validates `value` against component schema `name`; returns error texts. */
  validateComponent(name: string, value: unknown): string[] {
    const v = this.validator(`component ${name}`, { $ref: `${SCHEMA_PREFIX}${name}` });
    return v(value) ? [] : this.errorsText(v);
  }

  errorsText(v: ValidateFunction): string[] {
    return (v.errors ?? []).map(
      (e) => `${e.instancePath || "(body)"} ${e.message}${e.params ? " " + JSON.stringify(e.params) : ""}`,
    );
  }

  /** Every (METHOD, path template) of `paths`. */
  operations(): { method: string; path: string; op: Obj }[] {
    const out: { method: string; path: string; op: Obj }[] = [];
    for (const [path, item] of Object.entries<Obj>(this.doc.paths ?? {}))
      for (const m of HTTP_METHODS) if (item[m]) out.push({ method: m.toUpperCase(), path, op: item[m] });
    return out;
  }

  operation(method: string, path: string): Obj | undefined {
    return this.doc.paths?.[path]?.[method.toLowerCase()];
  }

  /** The documented numeric statuses of an operation. */
  statuses(method: string, path: string): number[] {
    const op = this.operation(method, path);
    return Object.keys(op?.responses ?? {})
      .filter((s) => /^[1-5][0-9][0-9]$/.test(s))
      .map(Number)
      .sort();
  }

  /** The response object documented for `status` (exact, else its `NXX` range). */
  response(responses: Obj | undefined, status: number): Obj | undefined {
    if (!responses) return undefined;
    const r = responses[String(status)] ?? responses[`${String(status)[0]}XX`];
    return r ? this.deref(r) : undefined;
  }

  /**
   * Checks one answer of the server against the spec: status documented,
   * required headers present and valid, media type documented, body valid
   * against the schema. Returns the problems (empty when it conforms).
   */
  checkResponse(method: string, path: string, status: number, headers: Headers, body: string): string[] {
    const op = this.operation(method, path);
    if (!op) return [`${method} ${path} is not an operation of the spec`];
    const resp = this.response(op.responses, status);
    if (!resp) return [`status ${status} is not documented for ${method} ${path}`];
    const problems: string[] = [];
    for (const [name, h] of Object.entries<Obj>(resp.headers ?? {})) {
      const hd = this.deref(h);
      const value = headers.get(name);
      if (value === null) {
        if (hd.required) problems.push(`header ${name} missing`);
        continue;
      }
      if (hd.schema) {
        const v = this.validator(JSON.stringify(hd.schema), hd.schema);
        if (!v(value)) problems.push(`header ${name}: ${this.errorsText(v).join("; ")}`);
      }
    }
    const content: Obj | undefined = resp.content;
    if (!content || Object.keys(content).length === 0) {
      if (body.length !== 0) problems.push(`a body was sent where none is documented: ${body.slice(0, 200)}`);
      return problems;
    }
    const ctype = (headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    const media = content[ctype];
    if (!media) {
      problems.push(`content-type ${JSON.stringify(ctype)} is not documented (${Object.keys(content).join(", ")})`);
      return problems;
    }
    let value: unknown = body;
    if (ctype === "application/json") {
      try {
        value = JSON.parse(body);
      } catch {
        problems.push(`body is not JSON: ${body.slice(0, 200)}`);
        return problems;
      }
    }
    if (media.schema) {
      const v = this.validator(JSON.stringify(media.schema), media.schema);
      if (!v(value)) {
        problems.push(...this.errorsText(v).map((e) => `body ${e}`));
        problems.push(`body was: ${body.slice(0, 400)}`);
      }
    }
    return problems;
  }

  /** The request-body schema of webhook `name` (step, callback). */
  webhookBody(name: string): unknown {
    const op = this.doc.webhooks?.[name]?.post;
    const rb = op && this.deref(op.requestBody);
    const schema = rb?.content?.["application/json"]?.schema;
    if (!schema) throw new Error(`webhook ${name} has no JSON request body`);
    return schema;
  }

  /** Validates a webhook request body the server sent. */
  checkWebhookBody(name: string, value: unknown): string[] {
    const v = this.validator(`webhook ${name}`, this.webhookBody(name));
    return v(value) ? [] : this.errorsText(v);
  }

  /** Validates the headers of a webhook request against the webhook's header parameters. */
  checkWebhookHeaders(name: string, headers: Record<string, string | string[] | undefined>): string[] {
    const op = this.doc.webhooks?.[name]?.post;
    const problems: string[] = [];
    for (const p of (op?.parameters ?? []).map((x: unknown) => this.deref(x))) {
      if (p.in !== "header") continue;
      const raw = headers[String(p.name).toLowerCase()];
      const value = Array.isArray(raw) ? raw.join(", ") : raw;
      if (value === undefined) {
        if (p.required) problems.push(`header ${p.name} missing`);
        continue;
      }
      if (p.schema) {
        const v = this.validator(JSON.stringify(p.schema), p.schema);
        if (!v(value)) problems.push(`header ${p.name}: ${this.errorsText(v).join("; ")}`);
      }
    }
    return problems;
  }

  /** Validates a webhook answer body (what the test's webhook sends back). */
  checkWebhookAnswer(name: string, status: number, value: unknown): string[] {
    const op = this.doc.webhooks?.[name]?.post;
    const resp = this.response(op?.responses, status);
    if (!resp) return [`status ${status} is not documented for webhook ${name}`];
    const schema = resp.content?.["application/json"]?.schema;
    if (!schema) return [];
    const v = this.validator(`webhook ${name} answer ${status}`, schema);
    return v(value) ? [] : this.errorsText(v);
  }

  /**
   * Static check: every object schema the server sends (API responses,
   * webhook request bodies) must be closed (`additionalProperties: false`),
   * so a field the spec does not describe fails validation.
   */
  openObjectSchemas(): Problem[] {
    const problems: Problem[] = [];
    const seen = new Set<unknown>();
    const walk = (s: any, where: string, inNot: boolean): void => {
      if (s === null || typeof s !== "object") return;
      if (typeof s.$ref === "string") {
        const target = this.deref(s);
        if (seen.has(target)) return;
        seen.add(target);
        walk(target, s.$ref, inNot);
        return;
      }
      const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
      if (!inNot && s.properties && s.additionalProperties !== false)
        problems.push({ where, what: "object schema with properties is not closed (additionalProperties: false)" });
      if (!inNot && types.includes("object") && !s.properties && s.additionalProperties === undefined)
        problems.push({ where, what: "object schema without properties must say what additionalProperties are" });
      for (const [k, sub] of Object.entries<any>(s.properties ?? {})) walk(sub, `${where}.${k}`, inNot);
      if (s.items) walk(s.items, `${where}[]`, inNot);
      if (s.additionalProperties && typeof s.additionalProperties === "object")
        walk(s.additionalProperties, `${where}{}`, inNot);
      for (const key of ["oneOf", "anyOf", "allOf"])
        (s[key] ?? []).forEach((sub: unknown, i: number) => walk(sub, `${where}/${key}/${i}`, inNot));
      if (s.not) walk(s.not, `${where}/not`, true);
    };
    for (const { method, path, op } of this.operations())
      for (const [status, r] of Object.entries<Obj>(op.responses ?? {})) {
        const resp = this.deref(r);
        for (const [ct, media] of Object.entries<Obj>(resp.content ?? {}))
          if (ct === "application/json") walk(media.schema, `${method} ${path} ${status}`, false);
      }
    for (const name of Object.keys(this.doc.webhooks ?? {})) walk(this.webhookBody(name), `webhook ${name}`, false);
    return problems;
  }
}

/** The routes of handlers/routes.c as "METHOD /path/{}" strings. */
export function routesOfC(routesC: string): string[] {
  const out: string[] = [];
  for (const m of routesC.matchAll(/\{\s*"([A-Z]+)"\s*,\s*"([^"]+)"\s*,/g)) out.push(`${m[1]} ${m[2]}`);
  return out;
}

/** The handler function of each route of handlers/routes.c ("METHOD /path/{}" -> name). */
export function handlersOfC(routesC: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of routesC.matchAll(/\{\s*"([A-Z]+)"\s*,\s*"([^"]+)"\s*,\s*(\w+)\s*,/g)) out.set(`${m[1]} ${m[2]}`, m[3]);
  return out;
}

/**
 * The query parameters a handler reads, from its C source: http_req_query
 * and hc_query_int calls in its body, and limit/cursor when it calls
 * hc_paging; and so on in the static helpers of handlers/*.c it hands its
 * request to (`run_page(r, ...)`). `sources` is the text of handlers/*.c.
 */
export function queryParamsOfHandler(sources: string, fn: string): string[] | undefined {
  const bodyOf = (re: RegExp): string | undefined => {
    const start = sources.search(re);
    if (start < 0) return undefined;
    const end = sources.indexOf("\n}\n", start);
    return sources.slice(start, end < 0 ? undefined : end);
  };
  const top = bodyOf(new RegExp(`\\nvoid ${fn}\\(struct http_req \\*r\\)\\n\\{`));
  if (top === undefined) return undefined;
  const names = new Set<string>();
  const seen = new Set<string>([fn]);
  const read = (body: string) => {
    for (const m of body.matchAll(/(?:http_req_query|hc_query_int)\(r,\s*"([a-z_]+)"/g)) names.add(m[1]);
    if (/\bhc_paging\(/.test(body)) {
      names.add("limit");
      names.add("cursor");
    }
    for (const m of body.matchAll(/\b(\w+)\(r\s*[,)]/g)) {
      if (seen.has(m[1])) continue;
      seen.add(m[1]);
      const helper = bodyOf(new RegExp(`\\nstatic [\\w ]+\\b${m[1]}\\(struct http_req \\*r[,)]`));
      if (helper !== undefined) read(helper);
    }
  };
  read(top);
  return [...names].sort();
}

/** The operations of the spec in the same form ("{name}" becomes "{}"). */
export function routesOfSpec(c: Contract): string[] {
  return c.operations().map(({ method, path }) => `${method} ${path.replace(/\{[^}]+\}/g, "{}")}`);
}

/**
 * The accepted-field lists of handlers/*.c, sorted: the string arrays
 * (`static const char *const keys[] = {"a", NULL};`) whose name is passed
 * to hc_only_keys somewhere (so value lists such as `statuses` are not).
 */
export function keyListsOfC(sources: string): string[][] {
  const names = new Set([...sources.matchAll(/\bhc_only_keys\([^,]+,\s*(\w+)\s*,/g)].map((m) => m[1]));
  const out: string[][] = [];
  for (const m of sources.matchAll(/static const char \*const (\w+)\[\]\s*=\s*\{([^}]*)\}/g)) {
    if (!names.has(m[1])) continue;
    const keys = [...m[2].matchAll(/"([^"]*)"/g)].map((k) => k[1]).sort();
    if (keys.length) out.push(keys);
  }
  return out;
}

/**
 * The property sets of the request bodies of the spec: each body's schema,
 * its inline object properties and its arrays' object items (component refs
 * of a property, like KvEffects or Headers, are validated by code of their
 * own and left out), sorted. A body that is a `oneOf` counts each inline
 * alternative as a body; an alternative that is a component ref (the step
 * outcomes of a completion, parsed by service/verdict.c) is left out too.
 */
export function requestKeySets(c: Contract): { where: string; keys: string[] }[] {
  const out: { where: string; keys: string[] }[] = [];
  const seen = new Set<unknown>();
  const add = (s: any, where: string) => {
    if (!s || seen.has(s) || !s.properties) return;
    seen.add(s);
    out.push({ where, keys: Object.keys(s.properties).sort() });
  };
  for (const { method, path, op } of c.operations()) {
    if (!op.requestBody) continue;
    const body = c.deref(c.deref(op.requestBody).content?.["application/json"]?.schema);
    const alternatives: any[] = body?.oneOf ?? [body];
    alternatives.forEach((schema, i) => {
      if (schema?.$ref) return;
      const where = body?.oneOf ? `${method} ${path} oneOf[${i}]` : `${method} ${path}`;
      add(schema, where);
      for (const [k, p] of Object.entries<any>(schema?.properties ?? {})) {
        if (p.properties) add(p, `${where} .${k}`);
        if (p.items) add(c.deref(p.items), `${where} .${k}[]`);
      }
    });
  }
  return out;
}
