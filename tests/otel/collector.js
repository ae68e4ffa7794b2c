#!/usr/bin/env node
// A test OTLP/HTTP collector for hookflow's traces (tests/integration/test_traces.py).
//
// POST /v1/traces takes an ExportTraceServiceRequest in protobuf
// (application/x-protobuf) and decodes it with the OpenTelemetry project's own
// definitions: the protobufjs root that @opentelemetry/otlp-transformer ships
// (build/src/generated/root.js), not a parser of ours. Every span is kept, as
// plain JSON: GET /spans answers them all, GET /requests what each export
// request looked like (content type, span count, decode error).
//
// Environment:
//   COLLECTOR_PORT      port on 127.0.0.1 (default 0: any; the first line on
//                       stdout is "listening <port>")
//   COLLECTOR_DELAY_MS  answer each export this late (a slow collector;
//                       default 0); POST /release answers the held ones now
'use strict';

const http = require('node:http');
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');

const v1 = root.opentelemetry.proto.collector.trace.v1;
const Request = v1.ExportTraceServiceRequest;
const Response = v1.ExportTraceServiceResponse;
const MAX_BODY = 16 << 20;

const delayMs = Number(process.env.COLLECTOR_DELAY_MS || 0);
const spans = [];
const requests = [];
const held = new Set();

const hex = (b) => (b && b.length ? Buffer.from(b).toString('hex') : '');

function anyValue(v) {
  if (v == null) return null;
  if (v.stringValue != null) return v.stringValue;
  if (v.intValue != null) return Number(v.intValue);
  if (v.boolValue != null) return v.boolValue;
  if (v.doubleValue != null) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values || []).map(anyValue);
  return null;
}

function attributes(list) {
  const out = {};
  for (const kv of list || []) out[kv.key] = anyValue(kv.value);
  return out;
}

function record(req) {
  let n = 0;
  for (const rs of req.resourceSpans || []) {
    const resource = attributes(rs.resource && rs.resource.attributes);
    for (const ss of rs.scopeSpans || []) {
      for (const s of ss.spans || []) {
        spans.push({
          service: resource['service.name'] || null,
          instance: resource['service.instance.id'] || null,
          scope: ss.scope ? ss.scope.name : null,
          trace_id: hex(s.traceId),
          span_id: hex(s.spanId),
          parent_span_id: hex(s.parentSpanId),
          name: s.name,
          kind: s.kind,
          start_ns: String(s.startTimeUnixNano),
          end_ns: String(s.endTimeUnixNano),
          attributes: attributes(s.attributes),
          status: { code: s.status ? s.status.code || 0 : 0,
                    message: s.status ? s.status.message || '' : '' },
        });
        n += 1;
      }
    }
  }
  return n;
}

function answer(res, status, type, body) {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': body.length });
  res.end(body);
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/spans') {
    answer(res, 200, 'application/json', Buffer.from(JSON.stringify(spans)));
    return;
  }
  if (req.method === 'GET' && req.url === '/requests') {
    answer(res, 200, 'application/json', Buffer.from(JSON.stringify(requests)));
    return;
  }
  if (req.method === 'POST' && req.url === '/release') {
    for (const release of [...held]) release();
    answer(res, 200, 'application/json', Buffer.from('{}'));
    return;
  }
  if (req.method !== 'POST' || req.url !== '/v1/traces') {
    answer(res, 404, 'text/plain', Buffer.from('not found'));
    return;
  }
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size <= MAX_BODY) chunks.push(c);
  });
  req.on('end', () => {
    const info = { content_type: req.headers['content-type'] || '', bytes: size,
                   user_agent: req.headers['user-agent'] || '', spans: 0, error: null };
    requests.push(info);
    let status = 200;
    try {
      if (size > MAX_BODY) throw new Error('body too large');
      info.spans = record(Request.decode(Buffer.concat(chunks)));
    } catch (e) {
      info.error = String(e && e.message ? e.message : e);
      status = 400;
    }
    const body = Buffer.from(Response.encode(Response.create({})).finish());
    const send = () => {
      if (!res.writableEnded) answer(res, status, 'application/x-protobuf', body);
    };
    if (delayMs > 0) {
      let t = null;
      const release = () => { clearTimeout(t); held.delete(release); send(); };
      t = setTimeout(release, delayMs);
      held.add(release);
    } else {
      send();
    }
  });
});

server.listen(Number(process.env.COLLECTOR_PORT || 0), '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
