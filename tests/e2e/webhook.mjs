// The e2e test's step webhook: a tiny Node HTTP server on a free loopback port.
// What it does with a step depends on the run's `mode` header:
//
//   ok     step 0 continues to step 1, which succeeds
//   flaky  attempt 1 answers 503 (transient, Retry-After: 0), attempt 2 goes on like ok
//   throttle  step 0's attempt 1 answers 429 (Retry-After: 0; its endpoint is throttled),
//          attempt 2 goes on like ok
//   fail   generation 1 answers 500 with {"error": {"retryable": false}} (permanent: the
//          step is dead-lettered and the run fails); a rerun or redrive (generation >= 2)
//          succeeds
//   wait   step 0 continues with wait_for_signal on the run's `key` input (or on the
//          first of its `keys`, correlation_keys); step 1 succeeds with the signal it got
//   pending  step 0 answers 202 {"outcome": "pending", "heartbeat_timeout_ms": 600000}:
//          the test heartbeats and completes it with the request's memo.token; a later
//          step succeeds with its payload
//   parent step 0 continues with the `children` (and `wait_for_children`) of the run's
//          input: child runs it waits for; step 1 succeeds with the children it got
//   hang   never answers: the call stays in flight until hookflow aborts it (cancel)
//   big    steps 0..BIG_STEPS-2 continue with a payload of about 900 kB, the last step
//          succeeds: a history of several MiB, which the steps endpoint answers in
//          more than one page (its byte cap is 4 MiB)
//
// POST /callbacks/ok acknowledges terminal callbacks; POST /callbacks/broken answers
// 404 (a permanent error: the callback is dead-lettered).
import http from 'node:http';

export const BIG_STEPS = 7;

export function startWebhook() {
	const state = {
		calls: [],              // {run_id, step, attempt, generation, mode, token}
		hanging: new Map(),     // run_id -> {aborted: bool}
		callbacks: [],          // callback bodies received on /callbacks/ok
	};

	const server = http.createServer((req, res) => {
		const chunks = [];
		req.on('data', (c) => chunks.push(c));
		req.on('end', () => {
			let body = null;
			try {
				body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
			} catch {
				body = null;
			}
			handle(req, res, body);
		});
	});

	function reply(res, status, obj, headers = {}) {
		const text = obj === undefined ? '' : JSON.stringify(obj);
		res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
		res.end(text);
	}

	function handle(req, res, body) {
		if (req.method !== 'POST') return reply(res, 405, { error: { message: 'POST only' } });
		if (req.url === '/callbacks/ok') {
			state.callbacks.push(body);
			res.writeHead(204);
			return res.end();
		}
		if (req.url === '/callbacks/broken')
			return reply(res, 404, { error: { message: 'no callback receiver here' } });
		if (req.url !== '/steps' || body === null)
			return reply(res, 404, { error: { message: 'unknown path ' + req.url } });

		const mode = (body.headers && body.headers.mode) || 'ok';
		const { run_id, step, attempt, generation } = body;
		state.calls.push({ run_id, step, attempt, generation, mode, token: body.memo && body.memo.token });

		if (mode === 'hang') {
			const h = { aborted: false };
			state.hanging.set(run_id, h);
			res.on('close', () => {
				if (!res.writableEnded) h.aborted = true;
			});
			return; // never answered
		}
		if (mode === 'flaky' && step === 0 && attempt === 1)
			return reply(res, 503, { error: { message: 'upstream busy, try again' } },
				{ 'Retry-After': '0' });
		if (mode === 'throttle' && step === 0 && attempt === 1)
			return reply(res, 429, { error: { message: 'slow down: too many calls' } },
				{ 'Retry-After': '0' });
		if (mode === 'fail' && generation === 1)
			return reply(res, 500, {
				error: { message: 'boom: the card processor exploded', retryable: false },
			});
		if (mode === 'big') {
			if (step < BIG_STEPS - 1)
				return reply(res, 200, { outcome: 'continue', payload: { n: step + 1, blob: 'x'.repeat(900000) } });
			return reply(res, 200, { outcome: 'succeed', result: { ok: true, steps: BIG_STEPS } });
		}
		if (mode === 'wait') {
			if (step === 0) {
				const keys = body.payload.keys;
				return reply(res, 200, {
					outcome: 'continue',
					payload: { asked: body.payload },
					wait_for_signal: {
						...(keys ? { correlation_keys: keys } : { correlation_key: body.payload.key }),
						timeout_ms: 600000,
					},
				});
			}
			return reply(res, 200, { outcome: 'succeed', result: { approved_with: body.signal } });
		}
		if (mode === 'pending') {
			if (step === 0)
				return reply(res, 202, { outcome: 'pending', heartbeat_timeout_ms: 600000 });
			return reply(res, 200, { outcome: 'succeed', result: { completed_with: body.payload } });
		}
		if (mode === 'parent') {
			if (step === 0)
				return reply(res, 200, {
					outcome: 'continue',
					payload: { started: body.payload.children.length },
					children: body.payload.children,
					...(body.payload.wait ? { wait_for_children: body.payload.wait } : {}),
				});
			return reply(res, 200, { outcome: 'succeed', result: { children: body.children } });
		}
		if (step === 0)
			return reply(res, 200, { outcome: 'continue', payload: { n: 1, from: body.payload } });
		return reply(res, 200, {
			outcome: 'succeed',
			result: { ok: true, run: run_id, generation },
		});
	}

	return new Promise((resolve, reject) => {
		server.on('error', reject);
		server.listen(0, '127.0.0.1', () => {
			const { port } = server.address();
			resolve({
				url: `http://127.0.0.1:${port}`,
				state,
				close: () =>
					new Promise((done) => {
						server.closeAllConnections();
						server.close(() => done());
					}),
			});
		});
	});
}
