#!/usr/bin/env node
// hookflow example webhook (Node.js 20, with @hookflow/sdk from sdk/typescript).
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
// The SDK's handler checks every request's Standard Webhooks signature with the
// workflow's secret (WEBHOOK_SECRET="whsec_<base64 key>"): a bad or missing
// signature is a 401, and so is a webhook-timestamp more than 5 minutes away from
// now. The terminal callback (the workflow's callback_url, POST /done) is checked
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
const {
  WebhookVerificationError, continueWith, fail, handler, succeed, transientError, waitForSignal,
} = require('@hookflow/sdk');

const log = (msg) => console.log(msg);

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

// One step: the request (run_id, step, attempt, payload, signal, ...) and its
// context (the run's memo, reached with the delivery token hookflow sent).
async function step(call, ctx) {
  const { run_id: runId, payload } = call;

  if (call.step === 0) {
    let { found, value: quote } = await ctx.memo.get('quote');
    if (found) {
      log(`run ${runId} step 0 attempt ${call.attempt}: quote found in the memo`);
    } else {
      quote = expensiveQuote(payload);
      await ctx.memo.put('quote', quote);
      log(`run ${runId} step 0 attempt ${call.attempt}: quote computed and memoized`);
    }
    if (payload.fail_first_attempt && call.attempt === 1) {
      log(`run ${runId} step 0: failing attempt 1 on purpose (503, retried)`);
      return transientError('simulated outage');
    }
    return continueWith({ order: payload, quote, quote_reused: found });
  }

  if (call.step === 1) {
    const key = `approval:${runId}`;
    const timeoutMs = Number(process.env.WEBHOOK_APPROVAL_TIMEOUT_MS || 600000);
    log(`run ${runId} step 1: waiting for the signal ${key}`);
    return waitForSignal(key, { timeout_ms: timeoutMs, payload });
  }

  if (call.step === 2) {
    if (call.signal?.status !== 'delivered') {
      log(`run ${runId} step 2: no approval in time`);
      return fail('approval timed out');
    }
    log(`run ${runId} step 2: approved, done`);
    return succeed({ ...payload, approval: call.signal.payload });
  }

  return fail(`unexpected step ${call.step}`);
}

// The terminal callback: a delivery without `memo` (every step request has one).
function callback(done) {
  log(`callback: run ${done.run_id} ${done.status}: ${JSON.stringify(done.result)} error=${done.error}`);
}

function main() {
  const secret = process.env.WEBHOOK_SECRET || '';
  if (!secret) {
    console.error("webhook.js: set WEBHOOK_SECRET to the workflow's secret (whsec_...)");
    process.exit(1);
  }
  let hook;
  try {
    hook = handler(secret, step, {
      callback,
      // Refused deliveries and failed steps (a memo call that failed, say: the
      // handler answers 500, and hookflow retries the step later).
      onError: (e) => log(e instanceof WebhookVerificationError ? `rejected: ${e.message}` : `error: ${e.message}`),
    });
  } catch (e) {
    console.error(`webhook.js: WEBHOOK_SECRET: ${e.message}`);
    process.exit(1);
  }
  const host = process.env.WEBHOOK_HOST || '127.0.0.1';
  const port = Number(process.env.WEBHOOK_PORT || 9000);

  const server = http.createServer((req, res) => {
    if (req.method !== 'POST') { // a liveness probe for scripts
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"ok": true}');
      return;
    }
    hook(req, res); // steps on /steps, callbacks on /done: told apart by their body
  });
  server.listen(port, host, () => {
    log(`webhook listening on http://${host}:${port}/steps (callbacks on /done)`);
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
}

main();
