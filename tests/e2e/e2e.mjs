// The dashboard end to end: hookflow (started by run.sh, with API tokens), the
// webhook of webhook.mjs, and Debian's chromium driven by playwright-core.
//
// Environment (set by run.sh):
//   E2E_BASE_URL      the hookflow under test, e.g. http://127.0.0.1:40123
//   E2E_TOKEN         one of its HOOKFLOW_API_TOKENS (scope admin)
//   E2E_READ_TOKEN    its read-only token (read:<token> in HOOKFLOW_API_TOKENS)
//   E2E_OPEN_PORT     a second hookflow on the same database, without API tokens
//   E2E_CHROMIUM      the browser (/usr/bin/chromium)
//   E2E_PROFILE       a fresh, empty directory for --user-data-dir
//   E2E_OUT           where screenshots go (build/e2e)
//   E2E_DASHBOARD     dashboard/index.html, to compare with what GET / serves
//
// Every check asserts through the page and double-checks through the API. Waits
// are conditions polled until a deadline, never fixed sleeps. Prints one line per
// check and "e2e: N passed, M failed"; exits 1 when a check failed.
import { createHash } from 'node:crypto';
import { readFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

import { BIG_STEPS, startWebhook } from './webhook.mjs';

const base = must('E2E_BASE_URL');
const token = must('E2E_TOKEN');
const readToken = must('E2E_READ_TOKEN');
const openPort = must('E2E_OPEN_PORT');
const chromiumPath = must('E2E_CHROMIUM');
const profile = must('E2E_PROFILE');
const outDir = must('E2E_OUT');
const dashboardSrc = must('E2E_DASHBOARD');

function must(name) {
	const v = process.env[name];
	if (!v) {
		console.error(`e2e: ${name} is not set (run tests/e2e/run.sh)`);
		process.exit(2);
	}
	return v;
}

// ---- checks ----------------------------------------------------------------

let passed = 0;
let failed = 0;
const started = Date.now();

async function check(name, fn) {
	const t0 = Date.now();
	try {
		await fn();
		passed++;
		console.log(`ok    ${name} (${Date.now() - t0} ms)`);
	} catch (e) {
		failed++;
		console.log(`FAIL  ${name} (${Date.now() - t0} ms)\n      ${String((e && e.stack) || e).split('\n').join('\n      ')}`);
		// Without the service every later check would only wait for its deadline.
		const alive = await fetch(base + '/healthz').then((r) => r.ok, () => false);
		if (!alive) throw new Error(`hookflow no longer answers on ${base}: stopping here`);
	}
}

function assert(cond, message) {
	if (!cond) throw new Error(message);
}

function eqSet(a, b) {
	const x = [...a].sort();
	const y = [...b].sort();
	return x.length === y.length && x.every((v, i) => v === y[i]);
}

// Polls `fn` until it returns a truthy value or the deadline passes.
async function until(what, fn, timeout = 15000) {
	const end = Date.now() + timeout;
	let last = null;
	for (;;) {
		try {
			const v = await fn();
			if (v) return v;
			last = null;
		} catch (e) {
			last = e;
		}
		if (Date.now() > end)
			throw new Error(`timed out after ${timeout} ms waiting for ${what}` +
				(last ? `: ${last.message}` : ''));
		await new Promise((r) => setTimeout(r, 100));
	}
}

// ---- the API -----------------------------------------------------------------

async function api(method, p, body, tok = token) {
	const headers = { Authorization: `Bearer ${tok}` };
	if (body !== undefined) headers['Content-Type'] = 'application/json';
	const res = await fetch(base + p, {
		method,
		headers,
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	const text = await res.text();
	let data = null;
	try {
		data = text ? JSON.parse(text) : null;
	} catch {
		data = null;
	}
	return { status: res.status, data, text, headers: res.headers };
}

async function apiOk(method, p, body) {
	const r = await api(method, p, body);
	if (r.status < 200 || r.status > 299)
		throw new Error(`${method} ${p} answered ${r.status}: ${r.text}`);
	return r.data;
}

const getRun = (id) => apiOk('GET', `/v1/runs/${encodeURIComponent(id)}`);
// The pages of a run's history, following next_cursor.
async function getStepPages(id) {
	const pages = [];
	let cursor = null;
	do {
		const q = cursor ? `?cursor=${encodeURIComponent(cursor)}` : '';
		const res = await apiOk('GET', `/v1/runs/${encodeURIComponent(id)}/steps${q}`);
		pages.push(res.steps);
		cursor = res.next_cursor;
	} while (cursor);
	return pages;
}
const getSteps = async (id) => (await getStepPages(id)).flat();
const deadLetters = async (q = '') => (await apiOk('GET', `/v1/dead-letters?limit=1000${q}`)).dead_letters;

// ---- the scenario ----------------------------------------------------------

const WF = 'e2e-orders';
const WF_OTHER = 'e2e-other';
// Flow-control settings shown on the Workflows page: key mode skip with a
// workflow-wide rate limit (its step webhook is busyHook, an origin of its own,
// so an endpoint row of its own), and debounce with a per-key limit.
const WF_FLOW = 'e2e-flow';
const WF_DEBOUNCE = 'e2e-debounce';
const THROTTLED_RUNS = ['throttled-1', 'throttled-2'];
const GROUP = 'e2e-batch';
const OK_RUNS = Array.from({ length: 9 }, (_, i) => `ok-${String(i + 1).padStart(2, '0')}`);
const WAIT_KEY = 'approval:wait-1/manager';
const BUFFERED_KEY = 'e2e buffered/key é?#%';
const FLOW_KEY = 'customer 7/é&?';
const groupRunId = (key) => createHash('sha256').update(`${GROUP}/${key}`).digest('hex');
const GROUP_RUNS = [groupRunId('a'), groupRunId('b')];
// Long-running steps and child runs (submitted after the run-list checks): a
// step left pending, a parent waiting for two children (whose steps are left
// pending too), a parent of more children than the page shows at once, and a
// run waiting on two correlation keys.
const WF_CHILD = 'e2e-child';
const PENDING_RUN = 'pending-1';
const PARENT_RUN = 'parent-1';
const FANOUT_RUN = 'fanout-1';
const FANOUT = 25; // the run page lists children 20 at a time
const MULTI_RUN = 'multi-1';
const MULTI_KEYS = ['pay:1', 'cancel:1'];
const childRunId = (parent, generation, step, key) =>
	createHash('sha256').update(`${parent}/${generation}/${step}/${key}`).digest('hex');
const PARENT_CHILDREN = ['a', 'b'].map((k) => childRunId(PARENT_RUN, 1, 0, k));
const FANOUT_KEYS = Array.from({ length: FANOUT }, (_, i) => `c${String(i + 1).padStart(2, '0')}`);
// Schedules, created after the endpoint checks: the interval one fires every
// second, and its runs would change what the run-list and endpoint checks compare.
const SCHED_EVERY = 'e2e-every';
const SCHED_CRON = 'e2e-cron';
const CRON = '*/15 9-17 * * MON-FRI';
const CRON_ZONE = 'Europe/Paris';
const SCHED_NOTE = 'office hours <b>only</b> & "weekdays"';
const SCHED_RUN_ID = new RegExp(`^${SCHED_EVERY}-[0-9]{8}T[0-9]{6}Z$`);

const hook = await startWebhook();
const busyHook = await startWebhook();
let allRuns = [];
let context = null;
let page = null;
const pageErrors = [];
const foreignRequests = [];

const wf = {
	url: `${hook.url}/steps`,
	callback_url: `${hook.url}/callbacks/ok`,
	timeout_ms: 120000,
	max_attempts: 3,
	retry_backoff: { base_ms: 50, max_ms: 500 },
};

async function setup() {
	await apiOk('PUT', `/v1/workflows/${WF}`, wf);
	await apiOk('PUT', `/v1/workflows/${WF_OTHER}`, wf);
	await apiOk('PUT', `/v1/workflows/${WF_FLOW}`, {
		...wf, url: `${busyHook.url}/steps`, key_mode: 'skip', rate_limit: { limit: 5, period_ms: 1000 },
	});
	await apiOk('PUT', `/v1/workflows/${WF_DEBOUNCE}`, {
		...wf, key_mode: 'debounce', debounce_ms: 250, debounce_max_ms: 2000,
		rate_limit: { limit: 10, period_ms: 60000, per_key: true }, endpoint_control: false,
	});
	const submit = (run_id, mode, extra = {}) =>
		apiOk('POST', '/v1/runs', {
			workflow: WF, run_id, input: { order: run_id }, headers: { mode }, ...extra,
		});
	for (const id of OK_RUNS) await submit(id, 'ok');
	await submit('flaky-1', 'flaky');
	await submit('fail-rerun', 'fail');
	await submit('fail-redrive', 'fail');
	await submit('wait-1', 'wait', { input: { key: WAIT_KEY } });
	await submit('hang-1', 'hang');
	await submit('cb-broken', 'ok', { callback_url: `${hook.url}/callbacks/broken` });
	await submit('other-1', 'ok', { workflow: WF_OTHER, concurrency_key: FLOW_KEY });
	await submit('big-1', 'big');
	await apiOk('PUT', `/v1/groups/${GROUP}`, {
		workflow: WF,
		headers: { mode: 'ok' },
		members: [{ key: 'a', input: { i: 1 } }, { key: 'b', input: { i: 2 } }],
	});

	const want = {
		'flaky-1': 'succeeded', 'fail-rerun': 'failed', 'fail-redrive': 'failed',
		'wait-1': 'waiting', 'hang-1': 'running', 'cb-broken': 'succeeded', 'other-1': 'succeeded',
		'big-1': 'succeeded',
	};
	for (const id of [...OK_RUNS, ...GROUP_RUNS]) want[id] = 'succeeded';
	allRuns = Object.keys(want);
	await until('every run to settle', async () => {
		const { runs } = await apiOk('GET', '/v1/runs?limit=1000');
		const got = Object.fromEntries(runs.map((r) => [r.run_id, r.status]));
		return Object.entries(want).every(([id, st]) => got[id] === st) && hook.state.hanging.has('hang-1');
	}, 30000);
}

async function tableRunIds(table) {
	return page.$$eval(`#${table} tbody tr`, (trs) => trs.map((tr) => tr.getAttribute('data-run-id')));
}

async function text(sel) {
	return ((await page.textContent(sel)) || '').trim();
}

async function statusBadge() {
	return page.getAttribute('#run-status .badge', 'data-status').catch(() => null);
}

async function gotoHash(hash) {
	await page.evaluate((h) => { location.hash = h; }, hash);
}

async function openRun(id) {
	await gotoHash(`#/runs/${encodeURIComponent(id)}`);
	await until(`run ${id} to be shown`, async () =>
		(await text('#run-id')) === id && (await statusBadge()) !== null);
}

async function stepRows() {
	return page.$$eval('#steps-table tbody tr', (trs) => trs.map((tr) => {
		const q = (sel) => tr.querySelector(sel);
		const t = (sel) => (q(sel) ? q(sel).textContent.trim() : null);
		return {
			step: Number(tr.getAttribute('data-step')),
			attempt: Number(tr.getAttribute('data-attempt')),
			generation: Number(tr.getAttribute('data-generation')),
			result: (q('[data-col=result] .badge') || {}).textContent || null,
			http: t('[data-col=http]'),
			error: t('[data-col=error]'),
			duration: tr.children[6].textContent.trim(),
			pendingSince: t('[data-col=pending_since]'),
			signal: t('[data-col=signal] .badge'),
			signalKey: t('[data-col=signal] [data-key]'),
			heartbeatAt: t('[data-col=heartbeat] .when'),
			heartbeat: t('[data-col=heartbeat] pre'),
		};
	}));
}

// The run page's field `name` (its text), or null when it is not shown.
async function fieldText(name) {
	const el = await page.$(`#run-fields dd[data-field="${name}"]`);
	return el ? ((await el.textContent()) || '').trim() : null;
}

// The text of the element `sel`, '' when there is none (without waiting for it).
async function fieldOf(sel) {
	const el = await page.$(sel);
	return el ? ((await el.textContent()) || '').trim() : '';
}

// A timestamp as the page shows it: in full (ts) and to the second (shortTs).
const fullTs = (s) => s.replace('T', ' ').replace(/Z$/, ' UTC');
const shortTs = (s) => s.slice(0, 19).replace('T', ' ');

// JSON values compared whatever their key order (jsonb reorders keys).
function canon(v) {
	if (Array.isArray(v)) return v.map(canon);
	if (v && typeof v === 'object')
		return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])]));
	return v;
}
const sameJson = (a, b) => JSON.stringify(canon(a)) === JSON.stringify(canon(b));
const parsed = (text) => { try { return JSON.parse(text); } catch { return undefined; } };

// The children the run page lists: key, link, status.
async function childRows() {
	return page.$$eval('#children-table tbody tr', (trs) => trs.map((tr) => ({
		key: tr.querySelector('[data-col=key]').textContent.trim(),
		run_id: tr.getAttribute('data-run-id'),
		href: tr.querySelector('a').getAttribute('href'),
		link: tr.querySelector('a').textContent.trim(),
		status: tr.querySelector('[data-col=status] .badge').getAttribute('data-status'),
	})));
}

// The delivery token (memo.token) of a step request the webhook got.
function tokenOf(runId, step, attempt = 1) {
	const c = hook.state.calls.find((x) => x.run_id === runId && x.step === step && x.attempt === attempt);
	return c ? c.token : null;
}
const stepPath = (id, step, action) => `/v1/runs/${encodeURIComponent(id)}/steps/${step}/${action}`;

const shots = [];
async function shot(name) {
	mkdirSync(outDir, { recursive: true });
	const file = path.join(outDir, name);
	await page.screenshot({ path: file, fullPage: true });
	shots.push(file);
}

// Opens `url` in a page of its own (the second instance, without tokens),
// runs `fn` with it, and fails on any script error it raised.
async function withPage(url, fn) {
	const p2 = await context.newPage();
	const errs = [];
	p2.on('pageerror', (e) => errs.push(String(e)));
	try {
		await p2.goto(url);
		await fn(p2);
		assert(errs.length === 0, `errors on ${url}: ${errs.join(' | ')}`);
	} finally {
		await p2.close();
	}
}

const openBase = `http://127.0.0.1:${openPort}`;
// GET /v1/endpoints of each instance: [the one with tokens, the open one].
async function endpointTables() {
	const open = await fetch(`${openBase}/v1/endpoints`);
	assert(open.status === 200, `GET /v1/endpoints on the open instance: ${open.status}`);
	return [await apiOk('GET', '/v1/endpoints'), await open.json()];
}

// What the Endpoints page of `p` shows: the instance and each row's cells.
async function endpointsPage(p) {
	return p.evaluate(() => {
		const first = (td) => (td.firstChild ? td.firstChild.textContent : '').trim();
		return {
			instance: document.getElementById('endpoints-instance').textContent.trim(),
			rows: [...document.querySelectorAll('#endpoints-table tbody tr')].map((tr) => {
				const col = (c) => tr.querySelector(`[data-col=${c}]`);
				const badge = col('state').querySelector('.badge');
				return {
					endpoint: col('endpoint').textContent.trim(),
					state: badge.getAttribute('data-status'),
					stateText: badge.textContent.trim(),
					allowance: col('allowance').textContent.trim(),
					inflight: col('inflight').textContent.trim(),
					error_rate: first(col('error_rate')),
					paused_until: col('paused_until').textContent.trim(),
					open_until: col('open_until').textContent.trim(),
					last_error: first(col('last_error')),
					calls: col('calls').textContent.trim(),
					throttled: col('throttled').textContent.trim(),
					failures: col('failures').textContent.trim(),
					breaker_opens: col('breaker_opens').textContent.trim(),
				};
			}),
		};
	});
}

// The cells the page should show for an endpoint of the API's answer.
function endpointCells(e) {
	const when = (t) => (t ? t.slice(0, 19).replace('T', ' ') : '');
	return {
		endpoint: e.endpoint,
		state: e.state,
		stateText: e.state.replace('_', '-'),
		allowance: e.limited ? String(Math.round(e.allowance * 100) / 100) : 'unlimited',
		inflight: String(e.inflight),
		error_rate: `${(e.error_rate * 100).toFixed(1)}%`,
		paused_until: when(e.paused_until),
		open_until: when(e.open_until),
		last_error: e.last_error || '',
		calls: String(e.calls),
		throttled: String(e.throttled),
		failures: String(e.failures),
		breaker_opens: String(e.breaker_opens),
	};
}

async function noticeText() {
	return page.isVisible('#notice').then((v) => (v ? text('#notice .msg') : ''));
}

const getSched = (id) => apiOk('GET', `/v1/schedules/${encodeURIComponent(id)}`);
const schedRow = (id) => `#schedules-table tr[data-schedule="${id}"]`;

// The runs of a schedule listed under `sel` (a row's last runs, or the
// schedule page's recent runs): run id, status, link and its text.
async function schedRuns(sel) {
	return page.$$eval(`${sel} [data-run-id]`, (ds) => ds.map((d) => ({
		run_id: d.getAttribute('data-run-id'),
		status: d.querySelector('.badge').getAttribute('data-status'),
		href: d.querySelector('a').getAttribute('href'),
		text: d.querySelector('a').textContent.trim(),
	})));
}

// What the Schedules page shows in the row of schedule `id`.
async function schedCells(id) {
	const cells = await page.$eval(schedRow(id), (tr) => {
		const t = (c) => {
			const el = tr.querySelector(`[data-col=${c}]`);
			return el ? el.textContent.trim() : null;
		};
		return {
			rule: t('rule'), timezone: t('timezone'),
			state: tr.querySelector('[data-col=state] .badge').getAttribute('data-status'),
			note: t('note'), next_fire_time: t('next_fire_time'),
			fired: t('fired'), skipped: t('skipped'), missed: t('missed'),
		};
	});
	cells.runs = await schedRuns(`${schedRow(id)} [data-col=runs]`);
	return cells;
}

// A schedule's run as the dashboard lists it.
const schedRunWant = (r) => ({
	run_id: r.run_id, status: r.status, href: `#/runs/${r.run_id}`,
	text: r.fire_time ? shortTs(r.fire_time) : 'triggered',
});

// The row the Schedules page should show for schedule `s` of the API.
function schedCellsWant(s) {
	return {
		rule: s.cron || `every ${s.every_ms} ms`, timezone: s.cron ? s.timezone : null,
		state: s.paused ? 'paused' : 'active', note: s.note || '',
		next_fire_time: s.next_fire_time ? shortTs(s.next_fire_time) : '',
		fired: String(s.fired), skipped: String(s.skipped), missed: String(s.missed),
		runs: s.recent_runs.slice(0, 3).map(schedRunWant),
	};
}

// Time `t` in zone `zone`, in parts (computed here, apart from the page's code).
function zonedParts(t, zone) {
	return Object.fromEntries(new Intl.DateTimeFormat('en-US', {
		timeZone: zone, hourCycle: 'h23', weekday: 'short', year: 'numeric', month: '2-digit',
		day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
	}).formatToParts(new Date(t)).map((x) => [x.type, x.value]));
}

// The next fire times the schedule page lists: the time and its local text.
async function nextFireTimes() {
	return page.$$eval('#sd-next li', (lis) => lis.map((li) => ({
		time: li.getAttribute('data-time'),
		text: li.firstChild.textContent.trim(),
		local: li.querySelector('.when') ? li.querySelector('.when').textContent.trim() : null,
	})));
}

async function schedState() {
	return page.getAttribute('#sd-state .badge', 'data-status').catch(() => null);
}

async function openSchedule(id) {
	await gotoHash(`#/schedules/${encodeURIComponent(id)}`);
	await until(`schedule ${id} to be shown`, async () =>
		(await text('#sd-id')) === id && (await schedState()) !== null);
}

// ---- run -------------------------------------------------------------------

try {
	context = await chromium.launchPersistentContext(profile, {
		executablePath: chromiumPath,
		headless: true,
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
			'--disable-background-networking', '--disable-component-update', '--disable-sync'],
		viewport: { width: 1360, height: 900 },
	});
	context.setDefaultTimeout(15000);
	page = context.pages()[0] || (await context.newPage());
	page.on('pageerror', (e) => pageErrors.push(String(e)));
	page.on('console', (m) => {
		// A 401/404 answer is logged by the browser as a failed resource load.
		if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) pageErrors.push(m.text());
	});
	page.on('request', (r) => {
		if (!r.url().startsWith(base + '/')) foreignRequests.push(r.url());
	});

	await check('endpoints page: a clear empty state on an instance that has called no webhook yet', async () => {
		const listed = (await endpointTables())[1];
		assert(listed.enabled === true && listed.endpoints.length === 0, `the API lists ${JSON.stringify(listed)}`);
		await withPage(`${openBase}/#/endpoints`, async (p2) => {
			await until('the empty endpoints page', async () =>
				(await p2.isVisible('#endpoints-empty')) &&
				((await p2.textContent('#endpoints-instance')) || '').trim() === listed.instance);
			assert(/called no webhook/.test(await p2.textContent('#endpoints-empty')), 'the empty state does not say why');
			assert((await p2.$$('#endpoints-table tbody tr')).length === 0, 'rows shown for an empty table');
			assert(await p2.isHidden('#endpoints-off'), 'the "control is off" note shows');
			assert((await p2.getAttribute('header nav a.active', 'data-nav')) === 'endpoints', 'the nav does not mark Endpoints');
		});
	});

	await check('setup: workflows, runs and a group submitted over the API, all settled', setup);

	await check('dead letters recorded: the two failed steps (500) and the broken callback (404)', async () => {
		await until('the dead letters', async () => {
			const d = await deadLetters();
			const has = (kind, run, status) =>
				d.some((x) => x.kind === kind && x.run_id === run && x.last_http_status === status);
			return has('step', 'fail-rerun', 500) && has('step', 'fail-redrive', 500) &&
				has('callback', 'cb-broken', 404);
		}, 15000);
	});

	await check('GET / serves the embedded dashboard, self-contained, under a strict CSP', async () => {
		const res = await fetch(base + '/');
		assert(res.status === 200, `GET / answered ${res.status}`);
		const ct = res.headers.get('content-type');
		assert(ct === 'text/html; charset=utf-8', `content-type ${ct}`);
		// the page runs under a strict policy: any violation is a console
		// error, which the last check reports
		const csp = res.headers.get('content-security-policy') || '';
		assert(/default-src 'none'/.test(csp) && /script-src 'sha256-[^']+'/.test(csp) &&
			/style-src 'sha256-[^']+'/.test(csp) && /frame-ancestors 'none'/.test(csp) &&
			!/unsafe/.test(csp), `Content-Security-Policy: ${csp}`);
		assert(res.headers.get('x-content-type-options') === 'nosniff', 'no X-Content-Type-Options: nosniff');
		assert(res.headers.get('referrer-policy') === 'no-referrer', 'no Referrer-Policy');
		const body = await res.text();
		assert(body === readFileSync(dashboardSrc, 'utf8'), 'GET / differs from dashboard/index.html');
		// One self-contained page (no asset to fetch, one CSP hash per block),
		// fetched once per visit: 100 KiB, the charts, timeline and figures
		// pages included, is nothing on the network an operator reaches
		// hookflow through, and a limit still catches an accidental blow-up.
		assert(body.length < 100 * 1024, `the page is ${body.length} bytes`);
		assert(!/<script[^>]+src=|<link[^>]+href=|@import|url\(/i.test(body), 'the page loads something external');
		const api401 = await fetch(base + '/v1/runs');
		assert(api401.status === 401, `GET /v1/runs without a token answered ${api401.status}`);
	});

	await check('asks for the API token on 401, refuses a wrong one, accepts the right one', async () => {
		await page.goto(base + '/');
		await page.locator('#token-view').waitFor({ state: 'visible' });
		await shot('token.png');
		await page.fill('#token-input', 'not-the-right-token-at-all');
		await page.click('#token-form button[type=submit]');
		await until('the refusal of the wrong token', async () =>
			(await page.isVisible('#token-view')) && /refused/.test(await text('#token-error')));
		await page.fill('#token-input', token);
		await page.press('#token-input', 'Enter');
		await page.locator('#runs-view').waitFor({ state: 'visible' });
		await until('the run list', async () => (await tableRunIds('runs-table')).length === allRuns.length);
		assert(await page.isHidden('#token-view'), 'the token form is still shown');
		const kept = await page.evaluate(() => sessionStorage.getItem('hookflow.token'));
		assert(kept === token, 'the token is not kept in sessionStorage');
		assert(await page.isVisible('#auth-state'), 'no "token set" indicator');
	});

	await check('lists every run with its status', async () => {
		const ids = await tableRunIds('runs-table');
		assert(eqSet(ids, allRuns), `listed ${ids.join(',')}`);
		const st = await page.getAttribute('#runs-table tr[data-run-id="hang-1"] .badge', 'data-status');
		assert(st === 'running', `hang-1 shows ${st}`);
		const api = (await apiOk('GET', '/v1/runs?limit=1000')).runs.map((r) => r.run_id);
		assert(JSON.stringify(ids) === JSON.stringify(api), 'the order differs from the API (newest first)');
		await shot('dashboard.png');
	});

	await check('pages through runs with next_cursor (Load more)', async () => {
		await page.selectOption('#f-limit', '10');
		await page.click('#run-filters button[type=submit]');
		await until('a first page of 10', async () =>
			(await tableRunIds('runs-table')).length === 10 && (await page.isVisible('#runs-more')));
		const first = await tableRunIds('runs-table');
		const apiFirst = await apiOk('GET', '/v1/runs?limit=10');
		assert(JSON.stringify(first) === JSON.stringify(apiFirst.runs.map((r) => r.run_id)), 'page 1 differs from the API');
		assert(apiFirst.next_cursor, 'the API gave no next_cursor');
		await page.click('#runs-more');
		await until('the second page', async () => (await tableRunIds('runs-table')).length === allRuns.length);
		const all = await tableRunIds('runs-table');
		assert(new Set(all).size === all.length, 'a run is listed twice');
		assert(eqSet(all, allRuns), 'paging lost a run');
		await until('Load more to disappear', async () => page.isHidden('#runs-more'));
	});

	await check('filters runs by status', async () => {
		await page.selectOption('#f-limit', '25');
		await page.selectOption('#f-status', 'failed');
		await page.click('#run-filters button[type=submit]');
		const want = ['fail-rerun', 'fail-redrive'];
		await until('only the failed runs', async () => eqSet(await tableRunIds('runs-table'), want));
		const badges = await page.$$eval('#runs-table tbody .badge', (b) => b.map((x) => x.textContent));
		assert(badges.every((b) => b === 'failed'), `badges ${badges}`);
		const api = (await apiOk('GET', '/v1/runs?status=failed')).runs.map((r) => r.run_id);
		assert(eqSet(api, want), `the API lists ${api}`);
		await page.selectOption('#f-status', 'pending,scheduled,waiting,running,cancelling');
		await page.click('#run-filters button[type=submit]');
		await until('the active runs', async () => eqSet(await tableRunIds('runs-table'), ['wait-1', 'hang-1']));
	});

	await check('filters runs by workflow and by group id', async () => {
		await page.selectOption('#f-status', '');
		await page.fill('#f-workflow', WF_OTHER);
		await page.click('#run-filters button[type=submit]');
		await until('the runs of e2e-other', async () => eqSet(await tableRunIds('runs-table'), ['other-1']));
		await page.fill('#f-workflow', '');
		await page.fill('#f-group', GROUP);
		await page.click('#run-filters button[type=submit]');
		await until('the group members', async () => eqSet(await tableRunIds('runs-table'), GROUP_RUNS));
		const api = (await apiOk('GET', `/v1/runs?group_id=${GROUP}`)).runs.map((r) => r.run_id);
		assert(eqSet(api, GROUP_RUNS), `the API lists ${api}`);
		await page.fill('#f-workflow', 'no such workflow!');
		await page.click('#run-filters button[type=submit]');
		await page.locator('#banner').waitFor({ state: 'visible' });
		const err = await text('#banner');
		assert(/invalid_argument/.test(err) && /400/.test(err) && /workflow/.test(err), `banner: ${err}`);
		await page.click('#f-reset');
		await until('the unfiltered list', async () => (await tableRunIds('runs-table')).length === allRuns.length);
		assert(await page.isHidden('#banner'), 'the error banner stayed');
	});

	await check('shows a run\'s concurrency key, in the list and the run, and filters by it', async () => {
		await page.fill('#f-key', FLOW_KEY);
		await page.click('#run-filters button[type=submit]');
		await until('the runs of the key', async () => eqSet(await tableRunIds('runs-table'), ['other-1']));
		const api = (await apiOk('GET', `/v1/runs?concurrency_key=${encodeURIComponent(FLOW_KEY)}`)).runs;
		assert(eqSet(api.map((r) => r.run_id), ['other-1']), `the API lists ${api.map((r) => r.run_id)}`);
		assert((await text('#runs-table tr[data-run-id="other-1"] td[data-col=key]')) === FLOW_KEY,
			'the key is not shown in the list');
		await page.click('#runs-table tr[data-run-id="other-1"] a');
		await until('run other-1', async () => (await text('#run-id')) === 'other-1');
		assert((await text('#run-fields dd[data-field="Concurrency key"]')) === FLOW_KEY, 'the key is not shown on the run');
		await openRun('ok-01');
		assert((await page.$$('#run-fields dd[data-field="Concurrency key"]')).length === 0,
			'a run without a key shows one');
		await gotoHash('#/runs');
		await page.click('#f-reset');
		await until('the unfiltered list', async () => (await tableRunIds('runs-table')).length === allRuns.length);
	});

	await check('opens a failed run: details and step history with HTTP status and error', async () => {
		await page.selectOption('#f-status', 'failed');
		await page.click('#run-filters button[type=submit]');
		await until('the failed runs', async () => (await tableRunIds('runs-table')).length === 2);
		await page.click('#runs-table tr[data-run-id="fail-rerun"] a');
		await until('run fail-rerun', async () => (await text('#run-id')) === 'fail-rerun' && (await statusBadge()) === 'failed');
		assert(location_hash(await page.url()) === '#/runs/fail-rerun', `url ${page.url()}`);
		const input = JSON.parse(await text('#run-input'));
		assert(input.order === 'fail-rerun', `input ${JSON.stringify(input)}`);
		assert(/boom: the card processor exploded/.test(await text('#run-error')), 'the run error is not shown');
		assert(await page.isDisabled('#run-cancel'), 'cancel is enabled on a terminated run');
		assert(await page.isEnabled('#run-rerun'), 'rerun is disabled on a terminated run');
		const rows = await stepRows();
		const api = await getSteps('fail-rerun');
		assert(rows.length === api.length && rows.length === 1, `${rows.length} rows, API ${api.length}`);
		const r = rows[0];
		assert(r.result === 'permanent_error' && r.http === '500', `row ${JSON.stringify(r)}`);
		assert(/boom/.test(r.error) && r.error === api[0].error, `error ${r.error}`);
		assert(/ms|s$/.test(r.duration), `duration ${r.duration}`);
	});

	await check('step history of a retried run: transient 503, then continue and succeed', async () => {
		await openRun('flaky-1');
		await until('flaky-1 succeeded', async () => (await statusBadge()) === 'succeeded');
		const rows = await stepRows();
		const api = await getSteps('flaky-1');
		assert(rows.length === api.length, `${rows.length} rows, API ${api.length}`);
		rows.forEach((row, i) => {
			const a = api[i];
			assert(row.step === a.step && row.attempt === a.attempt && row.generation === a.generation &&
				row.result === a.result && row.http === (a.http_status === null ? '' : String(a.http_status)),
			`row ${i}: ${JSON.stringify(row)} vs ${JSON.stringify(a)}`);
		});
		const t = rows.find((x) => x.result === 'transient_error');
		assert(t && t.http === '503' && t.attempt === 1 && /upstream busy/.test(t.error), `transient row ${JSON.stringify(t)}`);
		assert(rows.some((x) => x.step === 0 && x.attempt === 2 && x.result === 'continue'), 'no second attempt of step 0');
		assert(rows.some((x) => x.step === 1 && x.result === 'succeed'), 'no succeeding step 1');
		assert(/"ok": true/.test(await text('#run-result')), 'the result is not shown');
	});

	await check('shows a history of several pages whole (follows next_cursor)', async () => {
		const pages = await getStepPages('big-1');
		assert(pages.length > 1, `the API answered the history in ${pages.length} page(s)`);
		const api = pages.flat();
		assert(api.length === BIG_STEPS, `the API lists ${api.length} attempts`);
		await openRun('big-1');
		await until('every attempt of big-1', async () => (await stepRows()).length === api.length);
		const rows = await stepRows();
		rows.forEach((row, i) => {
			assert(row.step === api[i].step && row.attempt === api[i].attempt && row.result === api[i].result,
				`row ${i}: ${JSON.stringify(row)} vs ${JSON.stringify(api[i])}`);
		});
		assert(rows.map((r) => r.step).join() === [...Array(BIG_STEPS).keys()].join(), 'steps out of order');
	});

	await check('cancels the hanging run: it becomes cancelled and the call is aborted', async () => {
		await openRun('hang-1');
		assert((await statusBadge()) === 'running', `hang-1 shows ${await statusBadge()}`);
		assert(await page.isDisabled('#run-rerun'), 'rerun is enabled on an active run');
		await page.click('#run-cancel');
		await until('the cancel notice', async () => /cancel/i.test(await noticeText()));
		await until('hang-1 to show cancelled', async () => (await statusBadge()) === 'cancelled', 20000);
		const run = await getRun('hang-1');
		assert(run.status === 'cancelled' && run.error === null, `API: ${run.status} ${run.error}`);
		await until('the webhook to see its call aborted', async () => hook.state.hanging.get('hang-1').aborted, 10000);
		await until('the cancelled attempt in the history', async () =>
			(await stepRows()).some((x) => x.result === 'cancelled'));
		assert(await page.isDisabled('#run-cancel'), 'cancel still enabled');
	});

	await check('reruns a failed run: a new generation that succeeds', async () => {
		await openRun('fail-rerun');
		await page.fill('#rerun-step', '0');
		await page.click('#run-rerun');
		await until('the rerun notice', async () => /generation 2/.test(await noticeText()));
		await until('fail-rerun to succeed', async () => (await statusBadge()) === 'succeeded', 20000);
		const run = await getRun('fail-rerun');
		assert(run.status === 'succeeded' && run.generation === 2 && run.result.generation === 2,
			`API: ${JSON.stringify(run)}`);
		await until('generation-2 steps in the history', async () => {
			const rows = await stepRows();
			return rows.some((x) => x.generation === 2 && x.result === 'succeed') &&
				rows.some((x) => x.generation === 1 && x.result === 'permanent_error');
		});
		assert(/Generation\s*2/.test(await text('#run-fields')), 'the generation is not shown');
	});

	await check('sends the signal that completes the waiting run', async () => {
		await page.click('header nav a[data-nav=signals]');
		await page.locator('#signals-view').waitFor({ state: 'visible' });
		await until('wait-1 in the waiting list', async () =>
			(await tableRunIds('waiting-table')).includes('wait-1'));
		assert((await text('#waiting-table tr[data-run-id="wait-1"] td.mono')) === WAIT_KEY, 'the key is not shown');
		await shot('signals.png');
		await page.click('#waiting-table tr[data-run-id="wait-1"] button');
		assert((await page.inputValue('#signal-key')) === WAIT_KEY, 'Use key did not fill the key');
		await page.fill('#signal-payload', '{"approved": true, "by": "e2e"}');
		await page.click('#signal-send');
		await until('the delivered notice', async () => /delivered/.test(await noticeText()));
		const run = await until('wait-1 to succeed (API)', async () => {
			const r = await getRun('wait-1');
			return r.status === 'succeeded' && r;
		});
		assert(run.result.approved_with.status === 'delivered' && run.result.approved_with.payload.approved === true,
			`result ${JSON.stringify(run.result)}`);
		await openRun('wait-1');
		await until('wait-1 to show succeeded', async () => (await statusBadge()) === 'succeeded');
		assert(/"approved": true/.test(await text('#run-result')), 'the result is not shown');
	});

	await check('buffers a signal for a key nobody waits on, then clears it', async () => {
		await page.click('header nav a[data-nav=signals]');
		await page.locator('#signals-view').waitFor({ state: 'visible' });
		await page.fill('#signal-key', BUFFERED_KEY);
		await page.fill('#signal-payload', '[1, 2, 3]');
		await page.click('#signal-send');
		await until('the buffered notice', async () => /buffered/.test(await noticeText()));
		await page.click('#signal-clear');
		await until('the removed notice', async () => /removed/.test(await noticeText()));
		const again = await apiOk('DELETE', `/v1/signals/${encodeURIComponent(BUFFERED_KEY)}`);
		assert(again.removed === false, 'the signal was still buffered');
		await page.fill('#signal-payload', '{not json');
		await page.click('#signal-send');
		await until('the JSON error', async () => /not valid JSON/.test(await text('#banner')));
	});

	await check('setup: a pending step, a parent waiting for two children, a parent of 25, a wait on two keys', async () => {
		await apiOk('PUT', `/v1/workflows/${WF_CHILD}`, wf);
		const submit = (run_id, mode, input) =>
			apiOk('POST', '/v1/runs', { workflow: WF, run_id, input, headers: { mode } });
		await submit(PENDING_RUN, 'pending', { order: PENDING_RUN });
		await submit(PARENT_RUN, 'parent', {
			children: ['a', 'b'].map((key) => ({
				key, workflow: WF_CHILD, input: { part: key }, headers: { mode: 'pending' },
			})),
		});
		await submit(FANOUT_RUN, 'parent', {
			children: FANOUT_KEYS.map((key) => ({ key, workflow: WF_CHILD, headers: { mode: 'ok' } })),
		});
		await submit(MULTI_RUN, 'wait', { keys: MULTI_KEYS });
		await until('the pending step, the waiting parent and its pending children, the fan-out, the wait', async () => {
			const [p, parent, fan, multi] = await Promise.all([PENDING_RUN, PARENT_RUN, FANOUT_RUN, MULTI_RUN].map(getRun));
			const kids = await Promise.all(PARENT_CHILDREN.map((id) => api('GET', `/v1/runs/${id}`)));
			return p.pending_since && tokenOf(PENDING_RUN, 0) && parent.status === 'waiting' &&
				kids.every((k) => k.status === 200 && k.data.pending_since && tokenOf(k.data.run_id, 0)) &&
				fan.status === 'succeeded' && multi.status === 'waiting';
		}, 30000);
		const parent = await getRun(PARENT_RUN);
		assert(sameJson(parent.waiting.children, { mode: 'all', count: 2, step: 0 }) &&
			parent.waiting.correlation_key === null, `the parent waits for ${JSON.stringify(parent.waiting)}`);
		assert(sameJson((await getRun(PARENT_CHILDREN[0])).parent,
			{ run_id: PARENT_RUN, generation: 1, step: 0, key: 'a' }), 'child a does not name its parent');
		const multi = await getRun(MULTI_RUN);
		// (the API lists a wait's keys in key order)
		assert(eqSet(multi.waiting.correlation_keys, MULTI_KEYS), `the run waits for ${JSON.stringify(multi.waiting)}`);
	});

	await check('a pending step: since when, its timeouts and its heartbeat details on the run\'s page', async () => {
		const tok = tokenOf(PENDING_RUN, 0);
		// HTML in the details is shown as text, never as markup
		const first = { progress: 40, note: '<b>halfway</b> & "counting"' };
		const hb = await api('POST', stepPath(PENDING_RUN, 0, 'heartbeat'), { details: first }, tok);
		assert(hb.status === 200 && hb.data.cancel_requested === false, `heartbeat answered ${hb.status}: ${hb.text}`);
		const run = await getRun(PENDING_RUN);
		assert(run.status === 'running' && run.pending_since && run.pending_timeout_at && run.heartbeat_timeout_at,
			`the API shows ${JSON.stringify(run)}`);
		await openRun(PENDING_RUN);
		await until('the pending fields', async () =>
			(await fieldText('Pending since')) === fullTs(run.pending_since) &&
			(await fieldText('Pending timeout')) === fullTs(run.pending_timeout_at) &&
			(await fieldText('Heartbeat timeout')) === fullTs(run.heartbeat_timeout_at));
		assert((await statusBadge()) === 'running', `status ${await statusBadge()}`);
		assert(/step 0 pending/.test(await fieldText('Status')), `status field: ${await fieldText('Status')}`);
		const [item] = await getSteps(PENDING_RUN);
		assert(item.result === 'pending' && item.finished_at === null && item.pending_since === run.pending_since &&
			sameJson(item.heartbeat.details, first), `the API's history: ${JSON.stringify(item)}`);
		let rows = await until('the pending attempt with its heartbeat', async () => {
			const r = await stepRows();
			return r.length === 1 && r[0].result === 'pending' && sameJson(parsed(r[0].heartbeat), first) && r;
		});
		assert(rows[0].step === 0 && rows[0].attempt === 1, `row ${JSON.stringify(rows[0])}`);
		assert(rows[0].pendingSince === `since ${shortTs(item.pending_since)}`, `pending since: ${rows[0].pendingSince}`);
		assert(rows[0].heartbeatAt === `at ${shortTs(item.heartbeat.at)}`, `heartbeat at: ${rows[0].heartbeatAt}`);
		assert((await page.$$('#steps-table b')).length === 0, 'the details were rendered as HTML');
		// a later heartbeat shows up while the page refreshes itself
		const second = { progress: 80, rows_done: [1, 2, 3] };
		const hb2 = await api('POST', stepPath(PENDING_RUN, 0, 'heartbeat'), { details: second }, tok);
		assert(hb2.status === 200, `second heartbeat answered ${hb2.status}`);
		const later = await getRun(PENDING_RUN);
		rows = await until('the later heartbeat and its new timeout', async () => {
			const r = await stepRows();
			return r.length === 1 && sameJson(parsed(r[0].heartbeat), second) &&
				(await fieldText('Heartbeat timeout')) === fullTs(later.heartbeat_timeout_at) && r;
		});
		assert(later.heartbeat_timeout_at > run.heartbeat_timeout_at, 'the heartbeat did not extend the timeout');
		await shot('pending.png');
	});

	await check('a completed pending step: its attempt keeps its heartbeat, the run goes on and succeeds', async () => {
		const done = await api('POST', stepPath(PENDING_RUN, 0, 'complete'),
			{ outcome: 'continue', payload: { done: true } }, tokenOf(PENDING_RUN, 0));
		assert(done.status === 200, `complete answered ${done.status}: ${done.text}`);
		await until(`${PENDING_RUN} to show succeeded`, async () => (await statusBadge()) === 'succeeded', 20000);
		const api0 = (await getSteps(PENDING_RUN))[0];
		const rows = await until('the whole history', async () => {
			const r = await stepRows();
			return r.length === 2 && r;
		});
		assert(rows[0].result === 'continue' && rows[0].pendingSince === `pending from ${shortTs(api0.pending_since)}` &&
			sameJson(parsed(rows[0].heartbeat), api0.heartbeat.details) && api0.heartbeat.details.progress === 80,
		`step 0: ${JSON.stringify(rows[0])} vs ${JSON.stringify(api0)}`);
		assert(rows[1].step === 1 && rows[1].result === 'succeed' && rows[1].pendingSince === null &&
			rows[1].heartbeat === null, `step 1: ${JSON.stringify(rows[1])}`);
		for (const f of ['Pending since', 'Pending timeout', 'Heartbeat timeout'])
			assert((await fieldText(f)) === null, `${f} still shown on an ended run`);
		assert(/"done": true/.test(await text('#run-result')), 'the result is not shown');
	});

	await check('a parent waiting for its children: what it waits for, its children linked, the parent linked from a child', async () => {
		const run = await getRun(PARENT_RUN);
		const listed = (await apiOk('GET', `/v1/runs/${PARENT_RUN}/children`)).children;
		await openRun(PARENT_RUN);
		const rows = await until('the two children listed', async () => {
			const r = await childRows();
			return r.length === 2 && r;
		});
		assert((await statusBadge()) === 'waiting', `status ${await statusBadge()}`);
		assert((await fieldText('Waiting for')) === 'all 2 of the child runs started by step 0 to end',
			`waiting for: ${await fieldText('Waiting for')}`);
		assert((await fieldText('Wait times out')) === fullTs(run.waiting.timeout_at), 'no wait timeout');
		assert(listed.map((c) => c.run_id).join() === PARENT_CHILDREN.join(), `the API lists ${listed.map((c) => c.run_id)}`);
		rows.forEach((r, i) => {
			const c = listed[i];
			assert(r.key === c.parent.key && r.run_id === c.run_id && r.link === c.run_id &&
				r.href === `#/runs/${c.run_id}` && r.status === c.status && r.status === 'running',
			`row ${i}: ${JSON.stringify(r)} vs ${c.parent.key} ${c.run_id} ${c.status}`);
		});
		assert(rows.map((r) => r.key).join() === 'a,b', `keys ${rows.map((r) => r.key)}`);
		assert((await text('#children-count')) === '2 child runs shown' && await page.isHidden('#children-more'),
			`count ${await text('#children-count')}`);
		await shot('children.png');

		await page.click(`#children-table tr[data-key="a"] a`);
		await until('child a shown', async () =>
			(await text('#run-id')) === PARENT_CHILDREN[0] && (await statusBadge()) === 'running');
		const parentLink = '#run-fields dd[data-field="Parent"] a';
		assert((await page.getAttribute(parentLink, 'href')) === `#/runs/${PARENT_RUN}` &&
			(await text(parentLink)) === PARENT_RUN, 'no link to the parent');
		assert((await text('#run-fields dd[data-field="Parent"] [data-key]')) === 'a', 'the child\'s key is not shown');
		assert(/started by step 0 of generation 1/.test(await fieldText('Parent')), `parent: ${await fieldText('Parent')}`);
		assert((await fieldText('Pending since')) !== null, 'the child\'s pending step is not shown');
		assert(await page.isHidden('#children-box'), 'a run without children shows a children list');
		await shot('child.png');
		await page.click(parentLink);
		await until('back on the parent', async () => (await text('#run-id')) === PARENT_RUN &&
			(await childRows()).length === 2);

		// the Signals page lists runs waiting on keys, not those waiting for children
		await gotoHash('#/signals');
		await until('the waiting runs', async () => (await tableRunIds('waiting-table')).includes(MULTI_RUN));
		assert(!(await tableRunIds('waiting-table')).includes(PARENT_RUN), 'the parent is listed as waiting for a signal');
	});

	await check('the children end: the parent goes on, its list shows their status', async () => {
		await openRun(PARENT_RUN);
		await until('the children listed', async () => (await childRows()).length === 2);
		for (const [i, id] of PARENT_CHILDREN.entries()) {
			const key = ['a', 'b'][i];
			const r = await api('POST', stepPath(id, 0, 'complete'),
				{ outcome: 'succeed', result: { part: key } }, tokenOf(id, 0));
			assert(r.status === 200, `completing child ${key} answered ${r.status}: ${r.text}`);
		}
		await until('the parent to succeed, its children succeeded', async () =>
			(await statusBadge()) === 'succeeded' &&
			(await childRows()).every((c) => c.status === 'succeeded'), 20000);
		const run = await getRun(PARENT_RUN);
		assert(run.status === 'succeeded' && run.result.children.map((c) => `${c.key}:${c.status}:${c.result.part}`).join() ===
			'a:succeeded:a,b:succeeded:b', `the parent's result: ${JSON.stringify(run.result)}`);
		assert((await fieldText('Waiting for')) === null, 'a finished run still says what it waits for');
		assert(/"part": "b"/.test(await text('#run-result')), 'the result is not shown');
	});

	await check('a parent\'s children by page: 20, then Load more for the rest', async () => {
		const first = await apiOk('GET', `/v1/runs/${FANOUT_RUN}/children?limit=20`);
		assert(first.children.length === 20 && first.next_cursor, 'the API answered one page');
		await openRun(FANOUT_RUN);
		await until('a first page of 20', async () =>
			(await childRows()).length === 20 && (await page.isVisible('#children-more')));
		assert((await childRows()).map((r) => r.run_id).join() === first.children.map((c) => c.run_id).join(),
			'the first page differs from the API');
		assert(/more available/.test(await text('#children-count')), `count ${await text('#children-count')}`);
		await page.click('#children-more');
		await until('every child', async () => (await childRows()).length === FANOUT && (await page.isHidden('#children-more')));
		let rows = await childRows();
		assert(rows.map((r) => r.key).join() === FANOUT_KEYS.join(), `keys ${rows.map((r) => r.key)}`);
		assert(rows.every((r) => r.status === 'succeeded' && r.run_id === childRunId(FANOUT_RUN, 1, 0, r.key)),
			`rows ${JSON.stringify(rows)}`);
		// a refresh keeps every child shown
		await page.click('#run-refresh');
		await until('the refreshed list', async () => (await text('#children-count')) === `${FANOUT} child runs shown`);
		rows = await childRows();
		assert(rows.length === FANOUT && new Set(rows.map((r) => r.run_id)).size === FANOUT, `${rows.length} rows after a refresh`);
	});

	await check('a run waiting on two keys: the keys on its page and on the Signals page; the key that woke it in its history', async () => {
		const run = await getRun(MULTI_RUN);
		await openRun(MULTI_RUN);
		assert((await statusBadge()) === 'waiting', `status ${await statusBadge()}`);
		const keys = await page.$$eval('#run-fields dd[data-field="Waiting for"] [data-key]', (k) => k.map((x) => x.textContent));
		assert(keys.join() === run.waiting.correlation_keys.join() && eqSet(keys, MULTI_KEYS), `keys shown: ${keys}`);
		assert(/^a signal on any of/.test(await fieldText('Waiting for')), `waiting for: ${await fieldText('Waiting for')}`);
		assert((await fieldText('Wait times out')) === fullTs(run.waiting.timeout_at), 'no wait timeout');
		await shot('waiting-keys.png');
		await page.click('header nav a[data-nav=signals]');
		await page.locator('#signals-view').waitFor({ state: 'visible' });
		await until('a row per key', async () => eqSet(await page.$$eval(`#waiting-table tr[data-run-id="${MULTI_RUN}"]`,
			(t) => t.map((x) => x.getAttribute('data-key'))), MULTI_KEYS));
		await page.click(`#waiting-table tr[data-key="cancel:1"] button`);
		assert((await page.inputValue('#signal-key')) === 'cancel:1', 'Use key did not fill the key');
		await page.fill('#signal-payload', '{"choice": "cancel"}');
		await page.click('#signal-send');
		await until('the delivered notice', async () => /delivered/.test(await noticeText()));
		const done = await until(`${MULTI_RUN} to succeed (API)`, async () => {
			const r = await getRun(MULTI_RUN);
			return r.status === 'succeeded' && r;
		});
		assert(sameJson(done.result.approved_with, { status: 'delivered', correlation_key: 'cancel:1', payload: { choice: 'cancel' } }),
			`result ${JSON.stringify(done.result)}`);
		await openRun(MULTI_RUN);
		const rows = await until('the history with the signal', async () => {
			const r = await stepRows();
			return r.length === 2 && r;
		});
		assert(rows[0].signal === null, `step 0 shows a signal: ${JSON.stringify(rows[0])}`);
		assert(rows[1].step === 1 && rows[1].signal === 'delivered' && rows[1].signalKey === 'cancel:1',
			`step 1: ${JSON.stringify(rows[1])}`);
		assert((await getSteps(MULTI_RUN))[1].signal.correlation_key === 'cancel:1', 'the API history names no key');
		await shot('woken.png');
		// a wait on one key: its signal names no key
		await openRun('wait-1');
		const one = await until('wait-1\'s history', async () => {
			const r = await stepRows();
			return r.length === 2 && r;
		});
		assert(one[1].signal === 'delivered' && one[1].signalKey === null, `wait-1 step 1: ${JSON.stringify(one[1])}`);
	});

	await check('dead letters: kind filter, redrive a dead step (its run succeeds)', async () => {
		await page.click('header nav a[data-nav=dead-letters]');
		await page.locator('#dead-view').waitFor({ state: 'visible' });
		const all = await deadLetters();
		await until('every dead letter', async () =>
			(await page.$$('#dead-table tbody tr')).length === all.length);
		await shot('dead-letters.png');
		await page.selectOption('#d-kind', 'callback');
		await until('only callbacks', async () => {
			const kinds = await page.$$eval('#dead-table tbody tr', (t) => t.map((x) => x.getAttribute('data-kind')));
			return kinds.length === all.filter((d) => d.kind === 'callback').length && kinds.every((k) => k === 'callback');
		});
		await page.selectOption('#d-kind', 'step');
		await until('only steps', async () => {
			const kinds = await page.$$eval('#dead-table tbody tr', (t) => t.map((x) => x.getAttribute('data-kind')));
			return kinds.length === all.filter((d) => d.kind === 'step').length && kinds.every((k) => k === 'step');
		});
		const row = '#dead-table tr[data-run-id="fail-redrive"]';
		assert((await text(`${row} td:nth-child(7)`)) === '500', 'no HTTP 500 shown');
		assert(/boom/.test(await text(`${row} td:nth-child(8)`)), 'no last error shown');
		const id = await page.getAttribute(row, 'data-dead-id');
		await page.click(`${row} button[data-action=redrive]`);
		await until('the redrive notice', async () => /Redriven/.test(await noticeText()));
		await page.locator(row).waitFor({ state: 'detached' });
		const run = await until('fail-redrive to succeed (API)', async () => {
			const r = await getRun('fail-redrive');
			return r.status === 'succeeded' && r;
		});
		assert(run.generation === 2, `generation ${run.generation}`);
		assert(!(await deadLetters()).some((d) => d.id === id), 'the dead letter is still listed by the API');
		await page.click('#dead-refresh');
		await until('the list without it', async () =>
			(await page.$$(`#dead-table tr[data-dead-id="${id}"]`)).length === 0 &&
			(await page.$$eval('#dead-table tbody tr', (t) => t.length)) === all.filter((d) => d.kind === 'step').length - 1);
	});

	await check('dead letters: delete the dead callback (two clicks)', async () => {
		await page.selectOption('#d-kind', 'callback');
		const row = '#dead-table tr[data-run-id="cb-broken"]';
		await page.locator(row).waitFor();
		const http = await text(`${row} td:nth-child(7)`);
		const api = (await deadLetters('&kind=callback')).find((d) => d.run_id === 'cb-broken');
		assert(http === String(api.last_http_status === null ? '' : api.last_http_status), `HTTP ${http} vs API ${api.last_http_status}`);
		const id = await page.getAttribute(row, 'data-dead-id');
		await page.click(`${row} button[data-action=delete]`);
		assert(/Confirm/.test(await text(`${row} button[data-action=delete]`)), 'no confirmation step');
		await page.click(`${row} button[data-action=delete]`);
		await page.locator(row).waitFor({ state: 'detached' });
		assert(/deleted/.test(await noticeText()), 'no deleted notice');
		assert(!(await deadLetters('&kind=callback')).some((d) => d.id === id), 'the API still lists it');
	});

	await check('workflows: state and settings shown; Pause and Resume change it', async () => {
		await page.click('header nav a[data-nav=workflows]');
		await page.locator('#workflows-view').waitFor({ state: 'visible' });
		const rowOf = (name) => `#workflows-table tr[data-workflow="${name}"]`;
		const state = (name) => page.getAttribute(`${rowOf(name)} [data-col=state] .badge`, 'data-status').catch(() => null);
		await until('the workflows listed, active', async () =>
			(await state(WF)) === 'active' && (await state(WF_OTHER)) === 'active');
		const listed = await page.$$eval('#workflows-table tbody tr', (t) => t.map((x) => x.getAttribute('data-workflow')));
		const api = (await apiOk('GET', '/v1/workflows?limit=1000')).workflows;
		assert(JSON.stringify(listed) === JSON.stringify(api.map((w) => w.name)), `listed ${listed}`);
		const wfOf = (name) => api.find((w) => w.name === name);
		assert((await text(`${rowOf(WF)} [data-col=key_concurrency]`)) === String(wfOf(WF).key_concurrency), 'key_concurrency not shown');
		assert(await page.isDisabled(`${rowOf(WF_OTHER)} button[data-action=resume]`), 'resume enabled on an active workflow');
		await page.click(`${rowOf(WF_OTHER)} button[data-action=pause]`);
		await until('the paused notice', async () => /paused/.test(await noticeText()));
		await until(`${WF_OTHER} shown paused`, async () => (await state(WF_OTHER)) === 'paused');
		assert((await apiOk('GET', `/v1/workflows/${WF_OTHER}`)).paused === true, 'the API does not say paused');
		assert((await apiOk('GET', `/v1/workflows/${WF}`)).paused === false, 'the other workflow was paused too');
		assert(await page.isDisabled(`${rowOf(WF_OTHER)} button[data-action=pause]`), 'pause enabled on a paused workflow');
		await shot('workflows.png');
		await page.click('#workflows-refresh');
		await until(`${WF_OTHER} still paused after a refresh`, async () => (await state(WF_OTHER)) === 'paused');
		await page.click(`${rowOf(WF_OTHER)} button[data-action=resume]`);
		await until('the resumed notice', async () => /resumed/.test(await noticeText()));
		await until(`${WF_OTHER} shown active`, async () => (await state(WF_OTHER)) === 'active');
		assert((await apiOk('GET', `/v1/workflows/${WF_OTHER}`)).paused === false, 'the API still says paused');
	});

	await check('workflows: key mode, rate limit, endpoint and endpoint control shown', async () => {
		const rowOf = (name) => `#workflows-table tr[data-workflow="${name}"]`;
		const cells = (name) => page.$eval(rowOf(name), (tr) => Object.fromEntries(
			['key_mode', 'rate_limit', 'endpoint', 'endpoint_control'].map((c) =>
				[c, tr.querySelector(`[data-col=${c}]`).textContent.trim()])));
		const api = Object.fromEntries((await apiOk('GET', '/v1/workflows?limit=1000')).workflows.map((w) => [w.name, w]));
		assert(api[WF_FLOW].key_mode === 'skip' && api[WF_FLOW].rate_limit.limit === 5 &&
			api[WF_FLOW].rate_limit.period_ms === 1000 && api[WF_FLOW].rate_limit.per_key === false,
		`the API answers ${JSON.stringify(api[WF_FLOW])}`);
		const want = {
			[WF]: { key_mode: 'queue', rate_limit: 'none', endpoint: hook.url, endpoint_control: 'on' },
			[WF_FLOW]: { key_mode: 'skip', rate_limit: '5 / 1000 ms', endpoint: busyHook.url, endpoint_control: 'on' },
			[WF_DEBOUNCE]: {
				key_mode: 'debounce 250 ms (max 2000 ms)', rate_limit: '10 / 60000 ms per key',
				endpoint: hook.url, endpoint_control: 'off',
			},
		};
		for (const [name, w] of Object.entries(want)) {
			assert(api[name].endpoint === w.endpoint, `${name}: the API's endpoint is ${api[name].endpoint}`);
			const got = await cells(name);
			assert(JSON.stringify(got) === JSON.stringify(w), `${name} shows ${JSON.stringify(got)}`);
		}
		await page.click(`${rowOf(WF_FLOW)} a[data-col=endpoint]`);
		await page.locator('#endpoints-view').waitFor({ state: 'visible' });
	});

	await check('endpoints page: each instance shows its own table, the throttled endpoint with its state and counts', async () => {
		const origin = busyHook.url;
		for (const id of THROTTLED_RUNS)
			await apiOk('POST', '/v1/runs', { workflow: WF_FLOW, run_id: id, input: { id }, headers: { mode: 'throttle' } });
		await until('the throttled runs to succeed', async () =>
			(await Promise.all(THROTTLED_RUNS.map(getRun))).every((r) => r.status === 'succeeded'), 20000);
		const answered429 = busyHook.state.calls.filter((c) => c.mode === 'throttle' && c.step === 0 && c.attempt === 1).length;
		assert(answered429 === THROTTLED_RUNS.length, `the webhook answered ${answered429} 429s`);
		// Each instance counts the calls it made; together, every call the webhook answered.
		const busyRow = (t) => t.endpoints.find((e) => e.endpoint === origin) || null;
		const total = (rows, k) => rows.reduce((n, r) => n + (r ? Number(r[k]) : 0), 0);
		await until('both instances to count every call to the busy endpoint', async () => {
			const rows = (await endpointTables()).map(busyRow);
			return total(rows, 'throttled') === answered429 && total(rows, 'calls') === busyHook.state.calls.length;
		});
		// The page of each instance shows the table of that instance, row by row
		// (it refreshes itself every 2 s; the API is asked again each round, as
		// error rates age).
		const matches = async (p, i) => {
			let shown = null;
			let wanted = null;
			await until(`the endpoints page of instance ${i + 1} to show its table`, async () => {
				const t = (await endpointTables())[i];
				shown = await endpointsPage(p);
				wanted = { instance: t.instance, rows: t.endpoints.map(endpointCells) };
				return JSON.stringify(shown) === JSON.stringify(wanted);
			}).catch((e) => {
				throw new Error(`${e.message}\n  shown:  ${JSON.stringify(shown)}\n  wanted: ${JSON.stringify(wanted)}`);
			});
			return shown;
		};
		await page.click('#endpoints-refresh');
		const mine = await matches(page, 0);
		assert(await page.isHidden('#endpoints-empty') && await page.isHidden('#endpoints-off'), 'an empty or off note shows');
		await shot('endpoints.png');
		let theirs = null;
		await withPage(`${openBase}/#/endpoints`, async (p2) => { theirs = await matches(p2, 1); });
		assert(mine.instance && theirs.instance && mine.instance !== theirs.instance,
			`both pages name instance ${mine.instance}`);
		const rows = [mine, theirs].map((t) => t.rows.find((r) => r.endpoint === origin) || null);
		assert(total(rows, 'throttled') === answered429, `the pages show ${total(rows, 'throttled')} throttled calls`);
		assert(total(rows, 'calls') === busyHook.state.calls.length, `the pages show ${total(rows, 'calls')} calls`);
		// an instance that got a 429 cut the endpoint's allowance: limited, breaker closed
		for (const r of rows.filter((x) => x && x.throttled !== '0')) {
			assert(r.state === 'closed' && r.stateText === 'closed', `state ${r.state}`);
			assert(/^[0-9.]+$/.test(r.allowance), `allowance ${r.allowance}`);
			assert(/slow down/.test(r.last_error) && r.failures === '0', `row ${JSON.stringify(r)}`);
		}
	});

	// ---- the figures: charts, a workflow's page, a run's timeline and callbacks ----

	await check('charts: throughput, latency and errors drawn from /v1/stats/series, their totals the API\'s', async () => {
		await page.click('header nav a[data-nav=overview]');
		await page.locator('#overview-view').waitFor({ state: 'visible' });
		const sums = (s) => ({
			throughput: {
				succeeded: s.points.reduce((n, p) => n + p.runs.succeeded, 0),
				failed: s.points.reduce((n, p) => n + p.runs.failed, 0),
				cancelled: s.points.reduce((n, p) => n + p.runs.cancelled, 0),
				'step attempts': s.points.reduce((n, p) => n + p.steps.attempts, 0),
			},
			errors: s.points.reduce((n, p) => n + p.steps.errors, 0),
		});
		// both read at nearly the same time; a refresh until they agree
		const agree = async (query) => {
			const want = sums(await apiOk('GET', `/v1/stats/series?${query}`));
			const got = await page.$$eval('#ov-charts .chart', (cs) =>
				Object.fromEntries(cs.map((c) => [c.getAttribute('data-chart'), JSON.parse(c.getAttribute('data-totals'))])));
			const ok = got.throughput && got.latency && got.errors &&
				Object.entries(want.throughput).every(([k, v]) => (got.throughput[k] || 0) === v) &&
				(got.errors.errors || 0) === want.errors;
			if (!ok) await page.click('#ov-refresh');
			return ok && want;
		};
		const all = await until('the charts to show what the API counts', () => agree('minutes=60'));
		assert(all.throughput.succeeded > 0 && all.throughput['step attempts'] > 0 && all.errors > 0,
			`nothing to draw: ${JSON.stringify(all)}`);
		assert((await page.$$('#ov-charts .chart svg rect')).length > 0, 'no bar drawn');
		assert((await page.$$('#ov-charts [data-chart=latency] svg path')).length === 2, 'no p50 and p95 lines');
		assert(/a point per 60 s/.test(await text('#ov-note')), `note: ${await text('#ov-note')}`);
		await shot('charts.png');
		await page.fill('#ov-workflow', WF_OTHER);
		await page.selectOption('#ov-minutes', '1440');
		await until(`the charts of ${WF_OTHER} over 24 hours`, async () =>
			/a point per 1440 s/.test(await text('#ov-note')) &&
			agree(`minutes=1440&workflow=${WF_OTHER}`));
		await page.fill('#ov-workflow', '');
		await page.selectOption('#ov-minutes', '60');
	});

	await check('a workflow\'s page: settings (signed, the secret never shown), runs by status and step figures as the API counts them', async () => {
		const rotated = await apiOk('POST', `/v1/workflows/${WF_OTHER}/secret`, { grace_ms: 0 });
		assert(typeof rotated.secret === 'string' && rotated.secret.length > 8, 'no secret to look for');
		await gotoHash('#/workflows');
		await page.click(`#workflows-table tr[data-workflow="${WF}"] a[data-col=name]`);
		await page.locator('#workflow-view').waitFor({ state: 'visible' });
		const cells = () => page.$$eval('#wf-counts tbody tr', (trs) => Object.fromEntries(trs.map((tr) => [
			tr.getAttribute('data-row'),
			Object.fromEntries([...tr.querySelectorAll('td')].filter((td) => td.textContent !== '')
				.map((td) => [td.getAttribute('data-status'), Number(td.textContent)]))])));
		const wfField = (name) => fieldOf(`#workflow-view dd[data-field="${name}"]`);
		const st = await until('the counts of the API on the page', async () => {
			const s = await apiOk('GET', `/v1/workflows/${WF}/stats`);
			const c = await cells().catch(() => null);
			return c && sameJson(c.active, s.active) && sameJson(c.last_hour, s.last_hour) &&
				(await wfField('Attempts')) === String(s.steps.attempts) && s;
		});
		assert(st.last_hour.succeeded > 0 && st.steps.errors > 0, JSON.stringify(st));
		assert((await wfField('Errors')) === String(st.steps.errors), 'errors not shown');
		assert((await wfField('Error rate')) === (100 * st.steps.error_rate).toFixed(1) + '%', `rate ${await wfField('Error rate')}`);
		assert(/ ms$/.test(await wfField('Duration p50')) && / ms$/.test(await wfField('Duration p95')), 'no percentiles');
		const signed = (await apiOk('GET', `/v1/workflows/${WF}`)).signed ? 'signed' : 'not signed';
		assert((await wfField('Signing')) === signed, `signing: ${await wfField('Signing')}, the API: ${signed}`);
		assert((await wfField('Step URL')) === wf.url && (await wfField('Max attempts')) === '3', 'settings not shown');
		assert((await page.$$('#wf-charts .chart')).length === 3, 'the workflow\'s charts are missing');
		assert((await page.getAttribute('#wf-state .badge', 'data-status')) === 'active', 'not shown active');
		await shot('workflow.png');
		// the rotated workflow: signed, and its new secret nowhere on the page
		await gotoHash(`#/workflows/${WF_OTHER}`);
		await until(`${WF_OTHER}'s page`, async () => (await text('#wf-name')) === WF_OTHER &&
			(await wfField('Signing')) === 'signed');
		assert(!(await page.content()).includes(rotated.secret), 'the secret is on the page');
		// pause and resume from the page
		await page.click('#wf-pause');
		await until('the paused notice', async () => /paused/.test(await noticeText()));
		await until('shown paused', async () => (await page.getAttribute('#wf-state .badge', 'data-status')) === 'paused');
		assert((await apiOk('GET', `/v1/workflows/${WF_OTHER}/stats`)).paused === true, 'the API does not say paused');
		assert(await page.isDisabled('#wf-pause') && await page.isEnabled('#wf-resume'), 'buttons after pause');
		await page.click('#wf-resume');
		await until('shown active again', async () => (await page.getAttribute('#wf-state .badge', 'data-status')) === 'active');
		assert((await apiOk('GET', `/v1/workflows/${WF_OTHER}`)).paused === false, 'the API still says paused');
	});

	const bars = () => page.$$eval('#timeline .tl-bar', (bs) => bs.map((b) => ({
		key: b.getAttribute('data-key'), result: b.getAttribute('data-result'),
	})));
	const adField = (name) => fieldOf(`#ad-fields dd[data-field="${name}"]`);

	await check('a run\'s timeline: a bar per attempt; an attempt\'s payload, answer, HTTP status, error and duration', async () => {
		await openRun('flaky-1');
		const steps = await getSteps('flaky-1');
		await until('a bar per attempt', async () => {
			const b = await bars();
			return b.length === steps.length && steps.every((s) =>
				b.some((x) => x.key === `${s.generation}/${s.step}/${s.attempt}` && x.result === s.result));
		});
		const failed = steps.find((s) => s.result === 'transient_error');
		assert(failed && failed.http_status === 503, `history ${JSON.stringify(steps)}`);
		await page.click(`#timeline .tl-bar[data-key="1/0/${failed.attempt}"]`);
		await page.locator('#attempt-detail').waitFor({ state: 'visible' });
		assert((await adField('HTTP status')) === '503', `http ${await adField('HTTP status')}`);
		assert((await adField('Error')) === failed.error, `error ${await adField('Error')}`);
		assert(sameJson(parsed(await text('#ad-payload')), failed.payload), 'the request payload differs');
		assert(parsed(await text('#ad-answer')).outcome === 'transient_error', 'the answer is not shown');
		const cont0 = steps.find((s) => s.step === 0 && s.result === 'continue');
		const next = steps.find((s) => s.step === 1);
		await page.click(`#timeline .tl-bar[data-key="1/0/${cont0.attempt}"]`);
		await until('the continue attempt shown', async () => (await adField('HTTP status')) === '200');
		assert((await adField('Duration')) !== '' && (await adField('Error')) === 'none', 'duration or error');
		const ans = parsed(await text('#ad-answer'));
		assert(ans.outcome === 'continue' && sameJson(ans.payload, next.payload), `answer ${JSON.stringify(ans)}`);
		assert(await page.isEnabled('#ad-rerun'), 'rerun from this step disabled for the admin token');
		await shot('timeline.png');
	});

	await check('callback deliveries on the run page: delivered, and refused (404) until dead', async () => {
		const cbOf = async (id) => (await apiOk('GET', `/v1/runs/${id}/callbacks`)).callbacks;
		const rows = () => page.$$eval('#callbacks-table tbody tr', (trs) => trs.map((tr) => ({
			status: tr.querySelector('[data-col=status] .badge').getAttribute('data-status'),
			attempts: tr.querySelector('[data-col=attempts]').textContent.trim(),
			http: tr.querySelector('[data-col=http]').textContent.trim(),
			error: tr.querySelector('[data-col=error]').textContent.trim(),
		})));
		const broken = await cbOf('cb-broken');
		assert(broken.length === 1 && broken[0].status === 'dead' && broken[0].last_http_status === 404, JSON.stringify(broken));
		await openRun('cb-broken');
		await until('the dead callback listed', async () => {
			const r = await rows();
			return r.length === 1 && r[0].status === 'dead' && r[0].http === '404' &&
				r[0].attempts === `${broken[0].attempts} of ${broken[0].max_attempts}` && r[0].error === broken[0].last_error;
		});
		await shot('callbacks.png');
		const ok = await cbOf(OK_RUNS[0]);
		await openRun(OK_RUNS[0]);
		await until('the delivered callback listed', async () => {
			const r = await rows();
			return r.length === 1 && r[0].status === 'done' && r[0].http === String(ok[0].last_http_status);
		});
	});

	await check('sends a signal from the run page: the run waiting on that key continues; the wait is drawn', async () => {
		const key = 'approval:wait-2/page';
		await apiOk('POST', '/v1/runs', { workflow: WF, run_id: 'wait-2', input: { key }, headers: { mode: 'wait' } });
		await until('wait-2 waiting', async () => (await getRun('wait-2')).status === 'waiting');
		await openRun('wait-2');
		await page.locator('#run-signal-box').waitFor({ state: 'visible' });
		assert((await page.inputValue('#run-signal-key')) === key, 'the key is not offered');
		await page.fill('#run-signal-payload', '{"approved": "from the run page"}');
		await page.click('#run-signal-send');
		await until('the delivered notice', async () => /delivered/.test(await noticeText()));
		const run = await until('wait-2 to succeed (API)', async () => {
			const r = await getRun('wait-2');
			return r.status === 'succeeded' && r;
		});
		assert(run.result.approved_with.payload.approved === 'from the run page', JSON.stringify(run.result));
		await until('wait-2 shown succeeded, the signal box gone', async () =>
			(await statusBadge()) === 'succeeded' && (await page.isHidden('#run-signal-box')));
		await until('the signal wait drawn on the timeline', async () =>
			(await page.$$('#timeline line[data-wait="signal wait"]')).length === 1);
		await page.click('#timeline .tl-bar[data-key="1/1/1"]');
		await until('the signal shown on the attempt', async () =>
			/^delivered.*from the run page/.test(await adField('Signal')));
		await shot('run-signal.png');
	});

	await check('reruns from a step chosen on the timeline: a new generation that starts at that step', async () => {
		const id = OK_RUNS[1];
		await openRun(id);
		await until('its two steps drawn', async () => (await bars()).length === 2);
		await page.click('#timeline .tl-bar[data-key="1/1/1"]');
		await page.locator('#attempt-detail').waitFor({ state: 'visible' });
		await page.click('#ad-rerun');
		await until('the rerun notice', async () => /from step 1: generation 2/.test(await noticeText()));
		const run = await until(`${id} to succeed again`, async () => {
			const r = await getRun(id);
			return r.status === 'succeeded' && r.generation === 2 && r;
		});
		const gen2 = (await getSteps(id)).filter((s) => s.generation === 2);
		assert(gen2.length === 1 && gen2[0].step === 1 && gen2[0].result === 'succeed', `generation 2: ${JSON.stringify(gen2)}`);
		assert(run.result.generation === 2, JSON.stringify(run.result));
		await until('generation 2 drawn', async () => (await bars()).some((b) => b.key === '2/1/1'));
	});

	await check('schedules: the list shows each schedule\'s rule, state and note (as text), next fire time, counts and last runs', async () => {
		const every = await api('PUT', `/v1/schedules/${SCHED_EVERY}`, {
			workflow: WF, every_ms: 1000, input: { from: 'schedule' }, headers: { mode: 'ok' },
		});
		assert(every.status === 201, `PUT ${SCHED_EVERY} answered ${every.status}: ${every.text}`);
		const cron = await api('PUT', `/v1/schedules/${SCHED_CRON}`, {
			workflow: WF, cron: CRON, timezone: CRON_ZONE, overlap: 'allow_all', headers: { mode: 'ok' },
			note: SCHED_NOTE,
		});
		assert(cron.status === 201, `PUT ${SCHED_CRON} answered ${cron.status}: ${cron.text}`);
		await until(`a run of ${SCHED_EVERY} to succeed`, async () =>
			(await getSched(SCHED_EVERY)).recent_runs.some((r) => r.status === 'succeeded'), 20000);
		await page.click('header nav a[data-nav=schedules]');
		await page.locator('#schedules-view').waitFor({ state: 'visible' });
		const listed = await until('the two schedules listed', async () => {
			const ids = await page.$$eval('#schedules-table tbody tr', (t) => t.map((x) => x.getAttribute('data-schedule')));
			return ids.length === 2 && ids;
		});
		const apiList = (await apiOk('GET', '/v1/schedules?limit=100')).schedules;
		assert(JSON.stringify(listed) === JSON.stringify(apiList.map((s) => s.id)) &&
			listed.join() === [SCHED_CRON, SCHED_EVERY].join(), `listed ${listed}, the API ${apiList.map((s) => s.id)}`);
		// the cron schedule, row for row as the API answers it (a Refresh
		// when a fire time passed in between)
		let shown = null;
		let want = null;
		await until(`the row of ${SCHED_CRON} as the API answers it`, async () => {
			want = schedCellsWant(await getSched(SCHED_CRON));
			shown = await schedCells(SCHED_CRON);
			if (JSON.stringify(shown) === JSON.stringify(want)) return true;
			await page.click('#schedules-refresh');
			return false;
		}).catch((e) => {
			throw new Error(`${e.message}\n  shown:  ${JSON.stringify(shown)}\n  wanted: ${JSON.stringify(want)}`);
		});
		assert(shown.rule === CRON && shown.timezone === CRON_ZONE && shown.state === 'active' &&
			shown.note === SCHED_NOTE && shown.next_fire_time !== '', `${SCHED_CRON}: ${JSON.stringify(shown)}`);
		assert((await page.$$('#schedules-table b')).length === 0, 'the note was rendered as HTML');
		// the interval schedule fires every second: its rule and state, and
		// its last runs, each linked to a run that names the schedule and the
		// fire time shown
		const ev = await schedCells(SCHED_EVERY);
		assert(ev.rule === 'every 1000 ms' && ev.timezone === null && ev.state === 'active' && ev.note === '',
			`${SCHED_EVERY}: ${JSON.stringify(ev)}`);
		assert(ev.runs.length >= 1 && ev.runs.length <= 3 && Number(ev.fired) >= ev.runs.length,
			`${SCHED_EVERY} shows ${ev.fired} fired and runs ${JSON.stringify(ev.runs)}`);
		for (const r of ev.runs) {
			assert(SCHED_RUN_ID.test(r.run_id) && r.href === `#/runs/${r.run_id}`, `run entry ${JSON.stringify(r)}`);
			const run = await getRun(r.run_id);
			assert(run.schedule && run.schedule.id === SCHED_EVERY && shortTs(run.schedule.fire_time) === r.text,
				`${r.text} shown for run ${JSON.stringify(run)}`);
		}
		assert(ev.next_fire_time > ev.runs[0].text, `next fire ${ev.next_fire_time} after the last run ${ev.runs[0].text}`);
		await shot('schedules.png');
	});

	await check('schedules: a cron schedule\'s page lists its 10 next fire times, in UTC and in its time zone', async () => {
		await page.click(`${schedRow(SCHED_CRON)} td a`);
		await until(`schedule ${SCHED_CRON} shown`, async () =>
			(await text('#sd-id')) === SCHED_CRON && (await page.$$('#sd-next li')).length > 0);
		assert(location_hash(await page.url()) === `#/schedules/${SCHED_CRON}`, `url ${page.url()}`);
		let times = null;
		let apiTimes = null;
		await until('the next fire times the API answers', async () => {
			apiTimes = (await getSched(SCHED_CRON)).next_fire_times;
			times = await nextFireTimes();
			return JSON.stringify(times.map((x) => x.time)) === JSON.stringify(apiTimes);
		}).catch((e) => {
			throw new Error(`${e.message}\n  shown: ${JSON.stringify(times)}\n  API:   ${JSON.stringify(apiTimes)}`);
		});
		assert(times.length === 10, `${times.length} next fire times`);
		const days = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri'];
		times.forEach((x, i) => {
			assert(x.text === fullTs(x.time), `time ${i}: ${x.text} for ${x.time}`);
			assert(i === 0 || x.time > times[i - 1].time, `time ${i} is not after the one before`);
			const p = zonedParts(x.time, CRON_ZONE);
			const local = `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.weekday} ${CRON_ZONE}`;
			assert(x.local === local, `time ${i} (${x.time}) shown in ${CRON_ZONE} as ${x.local}, not ${local}`);
			// what the rule says, read in Paris: minutes 0/15/30/45, 9 h to 17 h, Monday to Friday
			assert(['00', '15', '30', '45'].includes(p.minute) && p.second === '00' && Number(p.hour) >= 9 &&
				Number(p.hour) <= 17 && days.includes(p.weekday), `${x.local} does not match ${CRON}`);
		});
		const field = async (name) => (await text(`#sd-fields dd[data-field="${name}"]`));
		assert((await field('Rule')) === CRON && (await field('Time zone')) === CRON_ZONE &&
			(await field('Overlap')) === 'allow_all' && (await field('Note')) === SCHED_NOTE &&
			(await field('Workflow')) === WF, 'the settings shown differ');
		assert((await schedState()) === 'active' && (await page.$$('#schedule-view b')).length === 0, 'state or note');
		assert(await page.isEnabled('#sd-pause') && await page.isDisabled('#sd-resume') && await page.isEnabled('#sd-trigger'),
			'the buttons of an active schedule');
		await shot('schedule.png');
	});

	await check('schedules: a new run shows up on the schedule\'s page; the run\'s page names its schedule and fire time', async () => {
		await openSchedule(SCHED_EVERY);
		const first = await until('a run listed', async () => {
			const r = await schedRuns('#sd-runs');
			return r.length > 0 && r;
		});
		// the page refreshes itself: a later fire's run appears on top
		const runs = await until('a newer run listed', async () => {
			const r = await schedRuns('#sd-runs');
			return r.length > 0 && r[0].run_id > first[0].run_id && r;
		}, 15000);
		assert(runs.length <= 10 && runs.every((r) => SCHED_RUN_ID.test(r.run_id) && r.href === `#/runs/${r.run_id}`),
			`runs ${JSON.stringify(runs)}`);
		const api = (await getSched(SCHED_EVERY)).recent_runs.map(schedRunWant);
		assert(runs.every((r) => api.some((a) => a.run_id === r.run_id && a.text === r.text)),
			`shown ${JSON.stringify(runs)}, the API ${JSON.stringify(api)}`);
		const times = await nextFireTimes();
		assert(times.length === 10 && times.every((x, i) => x.local === null && x.text === fullTs(x.time) &&
			(i === 0 || Date.parse(x.time) - Date.parse(times[i - 1].time) === 1000)), `next fire times ${JSON.stringify(times)}`);
		assert((await text('#sd-fields dd[data-field="Rule"]')) === 'every 1000 ms', 'rule');
		assert((await page.$$('#sd-fields dd[data-field="Time zone"]')).length === 0, 'a time zone shown for an interval');
		assert(sameJson(parsed(await text('#sd-input')), { from: 'schedule' }), 'the input is not shown');
		const newest = runs[0];
		await page.click(`#sd-runs [data-run-id="${newest.run_id}"] a`);
		await until(`run ${newest.run_id} shown`, async () => (await text('#run-id')) === newest.run_id &&
			(await fieldText('Schedule')) !== null);
		const run = await getRun(newest.run_id);
		const link = '#run-fields dd[data-field="Schedule"] a';
		assert((await text(link)) === SCHED_EVERY && (await page.getAttribute(link, 'href')) === `#/schedules/${SCHED_EVERY}`,
			'no link to the schedule');
		assert((await fieldText('Fire time')) === fullTs(run.schedule.fire_time) && shortTs(run.schedule.fire_time) === newest.text,
			`fire time ${await fieldText('Fire time')} for ${JSON.stringify(run.schedule)}`);
		await shot('run-schedule.png');
		await page.click(link);
		await until('back on the schedule', async () => (await text('#sd-id')) === SCHED_EVERY);
		await openRun('ok-01');
		assert((await fieldText('Schedule')) === null && (await fieldText('Fire time')) === null,
			'a run without a schedule shows one');
	});

	await check('schedules: Pause with a note, Resume and Trigger now in the list (admin token)', async () => {
		await gotoHash('#/schedules');
		await until('the schedules listed', async () => (await page.$$('#schedules-table tbody tr')).length === 2);
		const btn = (id, a) => `${schedRow(id)} button[data-action=${a}]`;
		assert(await page.isDisabled(btn(SCHED_CRON, 'resume')) && await page.isEnabled(btn(SCHED_CRON, 'pause')) &&
			await page.isEnabled(btn(SCHED_CRON, 'trigger')), 'the buttons of an active schedule');
		await page.fill('#sched-note', 'maintenance: week 12');
		await page.click(btn(SCHED_CRON, 'pause'));
		await until('the paused notice', async () => /paused/.test(await noticeText()));
		let c = await until(`${SCHED_CRON} shown paused`, async () => {
			const x = await schedCells(SCHED_CRON);
			return x.state === 'paused' && x;
		});
		let s = await getSched(SCHED_CRON);
		assert(s.paused === true && s.note === 'maintenance: week 12' && c.note === s.note, `API ${s.paused} ${s.note}, shown ${c.note}`);
		assert(s.next_fire_times.length === 10, 'a paused schedule lists no next fire times');
		assert(await page.isDisabled(btn(SCHED_CRON, 'pause')) && await page.isEnabled(btn(SCHED_CRON, 'resume')),
			'the buttons of a paused schedule');
		assert((await page.inputValue('#sched-note')) === '', 'the note input kept the note');
		assert((await schedCells(SCHED_EVERY)).state === 'active', 'the other schedule was paused too');
		await page.click(btn(SCHED_CRON, 'resume'));
		await until('the resumed notice', async () => /resumed: next fire time/.test(await noticeText()));
		c = await until(`${SCHED_CRON} shown active`, async () => {
			const x = await schedCells(SCHED_CRON);
			return x.state === 'active' && x;
		});
		s = await getSched(SCHED_CRON);
		// a resume without a note keeps the note
		assert(s.paused === false && s.note === 'maintenance: week 12' && c.note === s.note, `API ${s.paused} ${s.note}`);
		await page.click(btn(SCHED_CRON, 'trigger'));
		const msg = await until('the trigger notice', async () => {
			const m = await noticeText();
			return /^Trigger of/.test(m) && m;
		});
		const m = /run (\S+) started[.]$/.exec(msg);
		assert(m && new RegExp(`^${SCHED_CRON}-trigger-`).test(m[1]), `notice: ${msg}`);
		const run = await getRun(m[1]);
		assert(run.schedule.id === SCHED_CRON && run.schedule.fire_time === null, `run ${JSON.stringify(run.schedule)}`);
		c = await until('the triggered run in the row', async () => {
			const x = await schedCells(SCHED_CRON);
			return x.runs.some((r) => r.run_id === m[1]) && x;
		});
		s = await getSched(SCHED_CRON);
		const r = c.runs.find((x) => x.run_id === m[1]);
		assert(r.text === 'triggered' && r.href === `#/runs/${m[1]}` && s.recent_runs.some((x) => x.run_id === m[1]),
			`entry ${JSON.stringify(r)}`);
		assert(Number(c.fired) >= 1 && Number(c.fired) <= s.fired, `fired ${c.fired}, the API ${s.fired}`);
		await until(`${m[1]} to succeed`, async () => (await getRun(m[1])).status === 'succeeded', 20000);
	});

	await check('schedules: Pause with a note and Trigger now on the schedule\'s page (a trigger runs while paused)', async () => {
		await openSchedule(SCHED_EVERY);
		await until('the buttons', async () => page.isEnabled('#sd-pause'));
		await page.fill('#sd-note', 'quiet for the rest of the test');
		await page.click('#sd-pause');
		await until('the paused notice', async () => /paused/.test(await noticeText()));
		await until(`${SCHED_EVERY} shown paused, with its note`, async () => (await schedState()) === 'paused' &&
			(await text('#sd-fields dd[data-field="Note"]')) === 'quiet for the rest of the test');
		assert(await page.isDisabled('#sd-pause') && await page.isEnabled('#sd-resume') && await page.isEnabled('#sd-trigger'),
			'the buttons of a paused schedule');
		const s = await getSched(SCHED_EVERY);
		assert(s.paused === true && s.note === 'quiet for the rest of the test', `API ${s.paused} ${s.note}`);
		// its runs end (a trigger while one is active would be skipped: overlap skip)
		await until(`the runs of ${SCHED_EVERY} to end`, async () =>
			(await getSched(SCHED_EVERY)).recent_runs.every((r) => ['succeeded', 'failed', 'cancelled'].includes(r.status)));
		await page.click('#sd-trigger');
		const msg = await until('the trigger notice', async () => {
			const m = await noticeText();
			return /^Trigger of/.test(m) && m;
		});
		const m = /run (\S+) started[.]$/.exec(msg);
		assert(m && m[1].startsWith(`${SCHED_EVERY}-trigger-`), `notice: ${msg}`);
		await until('the triggered run on the page, succeeded', async () => {
			const r = (await schedRuns('#sd-runs')).find((x) => x.run_id === m[1]);
			return r && r.text === 'triggered' && r.status === 'succeeded';
		}, 20000);
		const after = await getSched(SCHED_EVERY);
		assert(after.paused === true && after.recent_runs[0].run_id === m[1], `API ${JSON.stringify(after.recent_runs[0])}`);
		assert((await schedState()) === 'paused', 'the trigger resumed the schedule');
		await shot('schedule-paused.png');
	});

	await check('shows API errors from the error body (unknown run)', async () => {
		await gotoHash('#/runs/' + encodeURIComponent('no-such-run'));
		await page.locator('#banner').waitFor({ state: 'visible' });
		const b = await text('#banner');
		assert(/not_found \(404\)/.test(b) && /no-such-run/.test(b), `banner: ${b}`);
	});

	await check('screenshots', async () => {
		await openRun('flaky-1');
		await shot('run.png');
		for (const f of shots) console.log(`      screenshot: ${f}`);
		assert(shots.includes(path.join(outDir, 'dashboard.png')), 'no build/e2e/dashboard.png');
	});

	await check('Forget token asks for the token again, then shows the same run', async () => {
		await page.click('#forget-token');
		await page.locator('#token-view').waitFor({ state: 'visible' });
		assert(await page.isHidden('#token-error'), 'a refusal is shown after a plain forget');
		assert((await page.evaluate(() => sessionStorage.getItem('hookflow.token'))) === null, 'the token is still stored');
		await page.fill('#token-input', token);
		await page.press('#token-input', 'Enter');
		await until('the run shown again', async () =>
			(await page.isVisible('#run-view')) && (await text('#run-id')) === 'flaky-1' &&
			(await statusBadge()) === 'succeeded' && (await page.isHidden('#token-view')));
	});

	await check('a read-only token: the dashboard reads, its actions are disabled with a note', async () => {
		// a run left waiting, for the run page's signal form
		await apiOk('POST', '/v1/runs', { workflow: WF, run_id: 'wait-3', input: { key: 'approval:wait-3' }, headers: { mode: 'wait' } });
		await until('wait-3 waiting', async () => (await getRun('wait-3')).status === 'waiting');
		await page.click('#forget-token');
		await page.locator('#token-view').waitFor({ state: 'visible' });
		await page.fill('#token-input', readToken);
		await page.press('#token-input', 'Enter');
		await until('the run shown with the read token', async () =>
			(await page.isVisible('#run-view')) && (await text('#run-id')) === 'flaky-1' &&
			(await statusBadge()) === 'succeeded' && (await page.isVisible('#scope-note')));
		assert(/scope read/.test(await text('#scope-note')), 'the note does not say why');
		for (const b of ['#run-cancel', '#run-rerun', '#rerun-step'])
			assert(await page.isDisabled(b), `${b} is enabled for a read token`);
		await gotoHash('#/signals');
		await page.locator('#signals-view').waitFor({ state: 'visible' });
		for (const b of ['#signal-send', '#signal-clear'])
			assert(await page.isDisabled(b), `${b} is enabled for a read token`);
		await gotoHash('#/dead-letters');
		await page.selectOption('#d-kind', '');
		const dead = await deadLetters();
		assert(dead.length > 0, 'no dead letter left to show');
		await until('the dead letters listed', async () =>
			(await page.$$eval('#dead-table tbody tr', (t) => t.length)) === dead.length);
		const enabled = await page.$$eval('#dead-table button[data-action]', (bs) => bs.filter((b) => !b.disabled).length);
		assert(enabled === 0, `${enabled} dead-letter buttons enabled for a read token`);
		await gotoHash('#/workflows');
		const workflowCount = (await apiOk('GET', '/v1/workflows?limit=1000')).workflows.length;
		await until('the workflows listed for the read token', async () =>
			(await page.$$('#workflows-table tbody tr')).length === workflowCount);
		const wfEnabled = await page.$$eval('#workflows-table button[data-action]', (bs) => bs.filter((b) => !b.disabled).length);
		assert(wfEnabled === 0, `${wfEnabled} pause/resume buttons enabled for a read token`);
		await gotoHash('#/endpoints');
		await until('the endpoints listed for the read token', async () =>
			(await page.$$('#endpoints-table tbody tr[data-endpoint]')).length > 0);
		await gotoHash('#/schedules');
		await until('the schedules listed for the read token', async () =>
			(await page.$$('#schedules-table tbody tr')).length === 2);
		const schedEnabled = await page.$$eval('#schedules-table button[data-action]', (bs) => bs.filter((b) => !b.disabled).length);
		assert(schedEnabled === 0 && await page.isDisabled('#sched-note'),
			`${schedEnabled} schedule buttons enabled for a read token`);
		await openSchedule(SCHED_CRON);
		await until('the schedule page for the read token', async () => (await page.$$('#sd-next li')).length === 10);
		for (const b of ['#sd-pause', '#sd-resume', '#sd-trigger', '#sd-note'])
			assert(await page.isDisabled(b), `${b} is enabled for a read token`);
		await shot('schedule-read.png');
		// the figures read with a read token; their actions disabled
		await gotoHash(`#/workflows/${WF}`);
		await until('the workflow page for the read token', async () =>
			(await text('#wf-name')) === WF && (await page.$$('#wf-charts .chart')).length === 3);
		for (const b of ['#wf-pause', '#wf-resume'])
			assert(await page.isDisabled(b), `${b} is enabled for a read token`);
		await shot('workflow-read.png');
		await gotoHash('#/overview');
		await until('the charts for the read token', async () => (await page.$$('#ov-charts .chart')).length === 3);
		await openRun('wait-3');
		await page.locator('#run-signal-box').waitFor({ state: 'visible' });
		assert(await page.isDisabled('#run-signal-send'), 'the run page\'s Send signal is enabled for a read token');
		await page.click('#timeline .tl-bar[data-key="1/0/1"]');
		await page.locator('#attempt-detail').waitFor({ state: 'visible' });
		assert(await page.isDisabled('#ad-rerun'), 'Rerun from this step is enabled for a read token');
		await shot('run-read.png');
		await openSchedule(SCHED_CRON);
		const tr = await api('POST', `/v1/schedules/${SCHED_CRON}/trigger`, undefined, readToken);
		assert(tr.status === 403 && tr.data.error.code === 'forbidden', `a read token's trigger answered ${tr.status}`);
		// and the API itself refuses the read token's writes
		const r = await api('POST', '/v1/runs/hang-1/cancel', undefined, readToken);
		assert(r.status === 403 && r.data.error.code === 'forbidden', `a read token's cancel answered ${r.status}`);
		const p = await api('POST', `/v1/workflows/${WF}/pause`, undefined, readToken);
		assert(p.status === 403 && p.data.error.code === 'forbidden', `a read token's pause answered ${p.status}`);
		const sig = await api('POST', '/v1/signals/approval:wait-3', { payload: 1 }, readToken);
		assert(sig.status === 403, `a read token's signal answered ${sig.status}`);
		await apiOk('POST', '/v1/runs/wait-3/cancel');
		const who = await api('GET', '/v1/whoami', undefined, readToken);
		assert(who.status === 200 && who.data.scope === 'read', `whoami: ${who.text}`);
		// back to the admin token: the note goes, the actions come back
		await page.click('#forget-token');
		await page.locator('#token-view').waitFor({ state: 'visible' });
		await page.fill('#token-input', token);
		await page.press('#token-input', 'Enter');
		await until('the admin view of the schedule', async () =>
			(await page.isVisible('#schedule-view')) && (await page.isHidden('#scope-note')) &&
			(await page.isEnabled('#sd-pause')) && (await page.isEnabled('#sd-trigger')));
		await gotoHash('#/signals');
		await until('the admin view', async () =>
			(await page.isVisible('#signals-view')) && (await page.isHidden('#scope-note')) &&
			(await page.isEnabled('#signal-send')));
	});

	await check('without API tokens, on 127.0.0.1 and on localhost: the dashboard works; another origin cannot act', async () => {
		for (const host of ['127.0.0.1', 'localhost']) {
			const id = `open-${host.replace(/[.]/g, '-')}`;
			await apiOk('POST', '/v1/runs', { workflow: WF, run_id: id, delay_ms: 600000, input: { host } });
			await withPage(`http://${host}:${openPort}/#/runs/${id}`, async (p2) => {
				await until(`run ${id} on ${host}`, async () =>
					((await p2.textContent('#run-id')) || '').trim() === id &&
					(await p2.getAttribute('#run-status .badge', 'data-status').catch(() => null)) === 'scheduled');
				assert(await p2.isHidden('#token-view'), `a token is asked for on ${host}`);
				assert(await p2.isHidden('#scope-note'), `the read-only note shows on ${host}`);
				await p2.click('#run-cancel'); // a POST with Origin: http://<host>:<port>
				await until(`run ${id} cancelled from the page`, async () =>
					(await getRun(id)).status === 'cancelled');
			});
		}
		// A page of another origin (another local web server: the test's
		// webhook) posts a cancel: the browser sends it, the service refuses it.
		await apiOk('POST', '/v1/runs', { workflow: WF, run_id: 'open-victim', delay_ms: 600000 });
		const p3 = await context.newPage();
		try {
			await p3.goto(`${hook.url}/`);
			const sent = await p3.evaluate((url) =>
				fetch(url, { method: 'POST', mode: 'no-cors' }).then(() => 'sent', (e) => String(e)),
			`http://127.0.0.1:${openPort}/v1/runs/open-victim/cancel`);
			assert(sent === 'sent', `the browser did not send the request: ${sent}`);
		} finally {
			await p3.close();
		}
		const res = await fetch(`http://127.0.0.1:${openPort}/v1/runs/open-victim`);
		assert(res.status === 200, `GET open-victim: ${res.status}`);
		const victim = await res.json();
		assert(victim.status === 'scheduled', `the cross-origin cancel went through: ${victim.status}`);
		const refused = await fetch(`http://127.0.0.1:${openPort}/v1/runs/open-victim/cancel`, {
			method: 'POST', headers: { Origin: 'http://evil.example' },
		});
		assert(refused.status === 403, `a foreign Origin answered ${refused.status}`);
	});

	await check('the page raised no script error and fetched nothing from elsewhere', async () => {
		assert(pageErrors.length === 0, `errors: ${pageErrors.join(' | ')}`);
		assert(foreignRequests.length === 0, `requests: ${foreignRequests.join(' ')}`);
	});
} catch (e) {
	failed++;
	console.log(`FAIL  (aborted) ${String((e && e.stack) || e)}`);
} finally {
	if (context) await context.close().catch(() => {});
	await hook.close();
	await busyHook.close();
}

function location_hash(url) {
	const i = url.indexOf('#');
	return i < 0 ? '' : url.slice(i);
}

const t0 = Number(process.env.E2E_T0_MS) || started;
console.log(`e2e: took ${((Date.now() - t0) / 1000).toFixed(1)} s (installs excluded; checks ${((Date.now() - started) / 1000).toFixed(1)} s)`);
console.log(`e2e: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
