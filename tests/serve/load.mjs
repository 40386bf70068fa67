// load.mjs - the load test of `pooled serve` (run by tests/e2e/serve_load_test.sh, which
// starts the server and computes what `pooled run` answers): for SECONDS seconds, CLIENTS
// streaming clients ask greedy completions one after another, and each answer must be the
// single-client one; beside them a stream of malformed requests must each get its error
// in OpenAI's shape, /health must keep answering, and a few clients hang up mid-stream.
// Samples the server's RSS (PID) throughout. Plain fetch, no client library.
// Prints "FAIL: ..." lines and the numbers, then "RESULT passed failed".
import fs from 'node:fs';

const env = process.env;
const url = env.URL, pid = env.PID;
const seconds = Number(env.LOAD_SECONDS || 8), clients = Number(env.CLIENTS || 64);
const maxTokens = Number(env.MAX_TOKENS);
const prompts = JSON.parse(fs.readFileSync(env.CASES, 'utf8')); // [{prompt, expect}]

let passed = 0, failed = 0;
const fails = new Map(); // one line per kind of failure, with its count
function check(what, cond, detail) {
    if (cond) { passed++; return; }
    failed++;
    const n = fails.get(what);
    if (!n) console.log(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail).slice(0, 300)}`);
    fails.set(what, (n || 0) + 1);
}
for (const ev of ['uncaughtException', 'unhandledRejection'])
    process.on(ev, (e) => {
        console.log(`FAIL: ${e?.constructor?.name} ${e?.message}`);
        console.log(`RESULT ${passed} ${failed + 1}`);
        process.exit(1);
    });

const rssKiB = () => {
    const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
};
const end = Date.now() + seconds * 1000;
const stats = { answers: 0, ids: 0, bad: 0, aborted: 0, health: 0, slowestHealthMs: 0 };

// one streamed completion: the text of its chunks, checked against the expected one
async function streamOne(c, abortAfterFirst) {
    const ac = new AbortController();
    const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: c.prompt, max_tokens: maxTokens, temperature: 0, stream: true }),
        signal: ac.signal,
    });
    check('a well-formed request: 200', res.status === 200, [res.status, await (res.status === 200 ? '' : res.text())]);
    if (res.status !== 200) return;
    const dec = new TextDecoder();
    let buf = '', text = '', done = false, finish = null;
    try {
        for await (const part of res.body) {
            buf += dec.decode(part, { stream: true });
            let i;
            while ((i = buf.indexOf('\n\n')) >= 0) {
                const ev = buf.slice(0, i);
                buf = buf.slice(i + 2);
                if (!ev.startsWith('data: ')) continue;
                const data = ev.slice(6);
                if (data === '[DONE]') { done = true; continue; }
                const j = JSON.parse(data);
                if (j.choices?.[0]) {
                    text += j.choices[0].text ?? '';
                    finish = j.choices[0].finish_reason ?? finish;
                }
            }
            if (abortAfterFirst && text.length) {
                ac.abort();
                stats.aborted++;
                return;
            }
        }
    } catch (e) {
        if (abortAfterFirst && e.name === 'AbortError') return;
        throw e;
    }
    check('a stream ends with [DONE]', done);
    check('a stream: the single-client greedy text', text === c.expect, { got: text, want: c.expect });
    check('a stream: finish_reason', finish === 'length' || finish === 'stop', finish);
    stats.answers++;
}

async function client(k) {
    for (let n = 0; Date.now() < end; n++) {
        const c = prompts[(k + n) % prompts.length];
        // every 8th client hangs up after its first text, every third request
        await streamOne(c, k % 8 === 7 && n % 3 === 0);
    }
}

// malformed requests and their errors, one after another (four such streams run)
const bad = [
    ['/v1/completions', '{"prompt": ', 400],
    ['/v1/completions', '{"prompt": 7}', 400],
    ['/v1/chat/completions', '{"messages": "hi"}', 400],
    ['/v1/chat/completions', '{"messages": [{"role": "user", "content": "x"}], "n": 3}', 400],
    ['/v1/completions', '{"prompt": "x", "temperature": "hot"}', 400],
    ['/v1/nope', '{}', 404],
    ['/v1/completions', '\u0000\u0001\u0002', 400],
    ['/detokenize', '{"tokens": [99999999]}', 400],
];
async function malformed() {
    for (let n = 0; Date.now() < end; n++) {
        const [path, body, status] = bad[n % bad.length];
        const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
        const j = await res.json().catch(() => null);
        check(`malformed ${path} ${body.slice(0, 20)}: ${status}`, res.status === status, res.status);
        check(`malformed ${path}: OpenAI's error object`, typeof j?.error?.message === 'string', j);
        stats.bad++;
    }
}

async function health() {
    while (Date.now() < end) {
        const t = Date.now();
        const res = await fetch(`${url}/health`);
        await res.text();
        const ms = Date.now() - t;
        stats.slowestHealthMs = Math.max(stats.slowestHealthMs, ms);
        check('/health answers 200 within 2 s', res.status === 200 && ms < 2000, [res.status, ms]);
        stats.health++;
        await new Promise((r) => setTimeout(r, 250));
    }
}

const rss = [];
const sampler = setInterval(() => rss.push(rssKiB()), 250);
const t0 = Date.now();
await Promise.all([...Array(clients).keys()].map(client).concat([malformed(), malformed(), malformed(), malformed(), health()]));
clearInterval(sampler);
const wall = (Date.now() - t0) / 1000;

// memory stays bounded: the second half's peak is within 32 MiB of the first half's
const half = Math.floor(rss.length / 2);
const peak1 = Math.max(...rss.slice(0, half)), peak2 = Math.max(...rss.slice(half));
check('RSS bounded (second half peak within 32 MiB of the first half)', peak2 <= peak1 + 32 * 1024, [peak1, peak2]);
check('some answers', stats.answers > clients, stats.answers);

// the slots are free again: nothing in flight after the hung-up streams, and an answer comes
let inFlight = -1;
for (let i = 0; i < 40; i++) {
    const m = await (await fetch(`${url}/metrics`)).text();
    inFlight = Number(/^pooled_requests_in_flight (\d+)/m.exec(m)?.[1]);
    if (inFlight === 0) break;
    await new Promise((r) => setTimeout(r, 50));
}
check('nothing in flight at the end', inFlight === 0, inFlight);
await streamOne(prompts[0], false);
const cancelled = (fs.readFileSync(env.LOG, 'utf8').match(/, cancelled$/gm) || []).length;
check('hung-up streams were cancelled', stats.aborted === 0 || cancelled > 0, [stats.aborted, cancelled]);

console.log(`load: ${clients} clients for ${wall.toFixed(1)} s: ${stats.answers} answers, ${stats.aborted} hung up, ` +
    `${cancelled} cancelled, ${stats.bad} malformed, ${stats.health} health checks (slowest ${stats.slowestHealthMs} ms), ` +
    `RSS peak ${(peak1 / 1024).toFixed(1)} / ${(peak2 / 1024).toFixed(1)} MiB (first / second half)`);
for (const [what, n] of fails) if (n > 1) console.log(`FAIL x${n}: ${what}`);
console.log(`RESULT ${passed} ${failed}`);
