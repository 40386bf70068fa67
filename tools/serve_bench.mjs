// serve_bench.mjs - aggregate decode speed of a running `pooled serve` with C concurrent
// streams (a benchmark, not a test; tools/serve_bench.sh starts the server and runs this).
// Each stream asks a greedy /v1/completions of MAX_TOKENS ids after a prompt of about
// PROMPT_BYTES bytes that begins differently for every request (no cached prefix), streamed
// with usage. Prints one line per concurrency: streams, completion ids, wall seconds,
// aggregate tok/s, time to first token (median / max), and a JSON line with the same.
// Plain fetch, no packages. Env: URL, STREAMS ("1 4 16"), MAX_TOKENS (128),
// PROMPT_BYTES (128 to 4096 bytes, default 512), ROUNDS (1: each stream asks that many times).
const env = process.env;
const url = env.URL;
const streams = (env.STREAMS || '1 4 16').split(/\s+/).filter(Boolean).map(Number);
const maxTokens = Number(env.MAX_TOKENS || 128);
const promptBytes = Math.min(4096, Math.max(128, Number(env.PROMPT_BYTES || 512)));
const rounds = Number(env.ROUNDS || 1);
const filler = 'Once upon a time there was a little fox who lived in a quiet wood near a river. ';
let serial = 0;

async function one() {
    const head = `Story ${++serial} of ${process.pid}. `;
    let prompt = head;
    while (prompt.length < promptBytes) prompt += filler;
    prompt = prompt.slice(0, promptBytes);
    const t0 = performance.now();
    const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...(env.KEY ? { Authorization: `Bearer ${env.KEY}` } : {}) },
        body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, stream: true,
                               stream_options: { include_usage: true } }),
    });
    if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
    const dec = new TextDecoder();
    let buf = '', first = -1, usage = null;
    for await (const part of res.body) {
        buf += dec.decode(part, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
            const ev = buf.slice(0, i);
            buf = buf.slice(i + 2);
            if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
            const j = JSON.parse(ev.slice(6));
            if (first < 0 && j.choices?.[0]?.text) first = performance.now() - t0;
            if (j.usage) usage = j.usage;
        }
    }
    return { ttft: first, gen: usage?.completion_tokens ?? 0, prompt: usage?.prompt_tokens ?? 0 };
}

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
await one(); // warm-up
for (const c of streams) {
    const t0 = performance.now();
    const results = (await Promise.all([...Array(c)].map(async () => {
        const r = [];
        for (let k = 0; k < rounds; k++) r.push(await one());
        return r;
    }))).flat();
    const wall = (performance.now() - t0) / 1000;
    const gen = results.reduce((s, r) => s + r.gen, 0);
    const ttft = results.map((r) => r.ttft).filter((t) => t >= 0);
    const out = { streams: c, prompt_ids: median(results.map((r) => r.prompt)), completion_ids: gen,
                  wall_s: +wall.toFixed(2), tok_s: +(gen / wall).toFixed(1),
                  ttft_ms_median: Math.round(median(ttft)), ttft_ms_max: Math.round(Math.max(...ttft)) };
    console.log(`${String(c).padStart(3)} streams: ${gen} ids in ${wall.toFixed(2)} s = ${out.tok_s} tok/s aggregate, ` +
                `first token ${out.ttft_ms_median} ms median, ${out.ttft_ms_max} ms max (prompt ~${out.prompt_ids} ids)`);
    console.log(JSON.stringify(out));
}
