#!/usr/bin/env node
// hookflow example webhook (Node.js 20, no dependencies).
//
// The workflow "order" in three steps, the same as examples/python/webhook.py:
//
//   step 0  quote the order: "expensive" work (half a second of hashing), kept in
//           the run's memo so that a redelivery of the step (a retry, a crash, an
//           expired lease) reuses the quote instead of paying for it again
//   step 1  ask for an approval: continue, waiting for the signal
//           "approval:<run_id>" (WEBHOOK_APPROVAL_TIMEOUT_MS, default 10 minutes)
//   step 2  the signal arrived: succeed with the quote and the approval; the wait
//           timed out: fail the run
//
// Every request must carry a valid Standard Webhooks signature (the workflow's
// secret, WEBHOOK_SECRET="whsec_<base64 key>"): a bad or missing signature is a
// 401, and so is a webhook-timestamp more than 5 minutes away from now. The
// terminal callback (POST /done, when the workflow has a callback_url) is checked
// the same way and printed.
//
// An input with "fail_first_attempt": true answers 503 on attempt 1 of step 0
// after the quote was memoized, to show the retry finding it in the memo.
//
// Environment: WEBHOOK_SECRET (required), WEBHOOK_HOST (default 127.0.0.1),
// WEBHOOK_PORT (default 9000), WEBHOOK_APPROVAL_TIMEOUT_MS (default 600000).
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');

const TOLERANCE_S = 5 * 60;

const log = (msg) => console.log(msg);

// The HMAC key: the base64-decoded part of the secret after "whsec_".
function secretKey(secret) {
  if (!secret.startsWith('whsec_')) throw new Error('must start with whsec_');
  const b64 = secret.slice('whsec_'.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) throw new Error('not base64 after whsec_');
  return Buffer.from(b64, 'base64');
}

// null when the Standard Webhooks headers sign this body, else the reason.
function verify(key, headers, body) {
  const id = headers['webhook-id'];
  const stamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (!id || !stamp || !signatures) {
    return 'missing webhook-id, webhook-timestamp or webhook-signature';
  }
  if (!/^\d+$/.test(stamp)) return 'bad webhook-timestamp';
  if (Math.abs(Date.now() / 1000 - Number(stamp)) > TOLERANCE_S) {
    return 'webhook-timestamp too far from now';
  }
  const expected = crypto.createHmac('sha256', key)
    .update(`${id}.${stamp}.`).update(body).digest();
  // Several signatures may be sent, space separated, each "v1,<base64>".
  for (const sig of signatures.split(' ')) {
    const comma = sig.indexOf(',');
    if (comma < 0 || sig.slice(0, comma) !== 'v1') continue;
    const got = Buffer.from(sig.slice(comma + 1), 'base64');
    if (got.length === expected.length && crypto.timingSafeEqual(got, expected)) return null;
  }
  return 'no matching signature';
}

// The run's memo: {memo.url}/memo/{key}, authorised by the delivery token.
class Memo {
  constructor(memo) {
    this.base = memo.url.replace(/\/+$/, '') + '/memo/';
    this.auth = `Bearer ${memo.token}`;
  }

  async get(key) {
    const res = await fetch(this.base + encodeURIComponent(key), {
      headers: { Authorization: this.auth },
      signal: AbortSignal.timeout(10000),
    });
    if (res.status === 404) return { found: false };
    if (!res.ok) throw new Error(`memo GET ${key}: HTTP ${res.status}`);
    return { found: true, value: (await res.json()).value };
  }

  async put(key, value) {
    const res = await fetch(this.base + encodeURIComponent(key), {
      method: 'PUT',
      headers: { Authorization: this.auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ value }),
      signal: AbortSignal.timeout(10000),
    });
    if (!res.ok) throw new Error(`memo PUT ${key}: HTTP ${res.status}`);
  }
}

// Stands for slow or costly work: an external API, a big computation.
function expensiveQuote(order) {
  let digest = Buffer.from(JSON.stringify(order));
  const deadline = Date.now() + 500;
  let rounds = 0;
  while (Date.now() < deadline) {
    digest = crypto.createHash('sha256').update(digest).digest();
    rounds += 1;
  }
  const items = Array.isArray(order.items) ? order.items : [];
  const total = items.reduce((sum, i) => sum + Number(i.qty ?? 1) * Number(i.price_cents ?? 0), 0);
  return { total_cents: total, reference: digest.toString('hex').slice(0, 16), rounds };
}

// One step: [HTTP status, answer].
async function runStep(call) {
  const { run_id: runId, step, payload } = call;
  const memo = new Memo(call.memo);

  if (step === 0) {
    let { found, value: quote } = await memo.get('quote');
    if (found) {
      log(`run ${runId} step 0 attempt ${call.attempt}: quote found in the memo`);
    } else {
      quote = expensiveQuote(payload);
      await memo.put('quote', quote);
      log(`run ${runId} step 0 attempt ${call.attempt}: quote computed and memoized`);
    }
    if (payload.fail_first_attempt && call.attempt === 1) {
      log(`run ${runId} step 0: failing attempt 1 on purpose (503, retried)`);
      return [503, { error: { message: 'simulated outage', retryable: true } }];
    }
    return [200, {
      outcome: 'continue',
      payload: { order: payload, quote, quote_reused: found },
    }];
  }

  if (step === 1) {
    const key = `approval:${runId}`;
    const timeoutMs = Number(process.env.WEBHOOK_APPROVAL_TIMEOUT_MS || 600000);
    log(`run ${runId} step 1: waiting for the signal ${key}`);
    return [200, {
      outcome: 'continue',
      payload,
      wait_for_signal: { correlation_key: key, timeout_ms: timeoutMs },
    }];
  }

  if (step === 2) {
    const received = call.signal || {};
    if (received.status !== 'delivered') {
      log(`run ${runId} step 2: no approval in time`);
      return [200, { outcome: 'fail', reason: 'approval timed out' }];
    }
    log(`run ${runId} step 2: approved, done`);
    return [200, { outcome: 'succeed', result: { ...payload, approval: received.payload } }];
  }

  return [200, { outcome: 'fail', reason: `unexpected step ${step}` }];
}

function reply(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

function main() {
  const secret = process.env.WEBHOOK_SECRET || '';
  if (!secret) {
    console.error("webhook.js: set WEBHOOK_SECRET to the workflow's secret (whsec_...)");
    process.exit(1);
  }
  let key;
  try {
    key = secretKey(secret);
  } catch (e) {
    console.error(`webhook.js: WEBHOOK_SECRET: ${e.message}`);
    process.exit(1);
  }
  const host = process.env.WEBHOOK_HOST || '127.0.0.1';
  const port = Number(process.env.WEBHOOK_PORT || 9000);

  const server = http.createServer((req, res) => {
    if (req.method !== 'POST') {
      reply(res, 200, { ok: true }); // a liveness probe for scripts
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks); // verify the raw bytes, not re-encoded JSON
      const problem = verify(key, req.headers, body);
      if (problem) {
        log(`rejected ${req.url}: ${problem}`);
        reply(res, 401, { error: { message: problem, retryable: false } });
        return;
      }
      let call;
      try {
        call = JSON.parse(body.toString('utf8'));
      } catch {
        reply(res, 400, { error: { message: 'body is not JSON', retryable: false } });
        return;
      }
      if (req.url.startsWith('/done')) {
        log(`callback: run ${call.run_id} ${call.status}: ${JSON.stringify(call.result)} error=${call.error}`);
        reply(res, 200, { ok: true });
        return;
      }
      try {
        const [status, answer] = await runStep(call);
        reply(res, status, answer);
      } catch (e) { // a memo call failed, say: retry the step later
        log(`run ${call.run_id} step ${call.step}: ${e.message}`);
        reply(res, 503, { error: { message: e.message, retryable: true } });
      }
    });
  });
  server.listen(port, host, () => {
    log(`webhook listening on http://${host}:${port}/steps (callbacks on /done)`);
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
}

main();
