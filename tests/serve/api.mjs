// api.mjs - drives `pooled serve` with the real OpenAI and Anthropic client libraries
// (pinned in package.json). Run by tests/e2e/serve_test.sh, which starts the servers and
// computes what `pooled run` answers for the same rendered prompt; prints one "ok"/"FAIL"
// line per check and ends with "RESULT passed failed".
import fs from 'node:fs';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const env = process.env;
const chatUrl = env.CHAT_URL, storyUrl = env.STORY_URL, key = env.KEY;
const messages = JSON.parse(fs.readFileSync(env.MESSAGES, 'utf8'));
const expect = fs.readFileSync(env.EXPECT, 'utf8');          // pooled run, greedy
const storyExpect = fs.readFileSync(env.STORY_EXPECT, 'utf8');
const nPrompt = Number(env.N_PROMPT), nGen = Number(env.N_GEN), maxTokens = Number(env.MAX_TOKENS);

let passed = 0, failed = 0;
function check(what, cond, detail) {
    if (cond) passed++;
    else { failed++; console.log(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail).slice(0, 400)}`); }
}
async function expectError(what, cls, status, fn) {
    try {
        await fn();
        check(`${what}: an error`, false);
    } catch (e) {
        check(`${what}: ${cls.name}`, e instanceof cls, `${e.constructor.name} ${e.status} ${e.message}`);
        check(`${what}: status ${status}`, e.status === status, e.status);
    }
}

for (const ev of ['uncaughtException', 'unhandledRejection'])
    process.on(ev, (e) => {
        console.log(`FAIL: ${e?.constructor?.name} ${e?.status ?? ''} ${e?.message}`);
        console.log(`RESULT ${passed} ${failed + 1}`);
        process.exit(1);
    });

const oa = new OpenAI({ baseURL: `${chatUrl}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });
const an = new Anthropic({ baseURL: chatUrl, apiKey: key, maxRetries: 0, timeout: 60000 });
const system = messages[0].content, rest = messages.slice(1);
const model = 'any';

// OpenAI, whole and streamed: greedy text and usage as `pooled run` gives them
const r1 = await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: maxTokens });
check('openai chat: greedy text equals pooled run', r1.choices[0].message.content === expect,
      [r1.choices[0].message.content, expect]);
check('openai chat: prompt_tokens', r1.usage.prompt_tokens === nPrompt, r1.usage);
check('openai chat: completion_tokens', r1.usage.completion_tokens === nGen, r1.usage);
check('openai chat: total_tokens', r1.usage.total_tokens === nPrompt + nGen, r1.usage);
check('openai chat: finish_reason', r1.choices[0].finish_reason === (nGen === maxTokens ? 'length' : 'stop'),
      r1.choices[0].finish_reason);

let text = '', usage = null, finish = null, chunks = 0;
const s1 = await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: maxTokens,
                                              stream: true, stream_options: { include_usage: true } });
for await (const c of s1) {
    chunks++;
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
        text += ch.delta?.content ?? '';
        if (ch.finish_reason) finish = ch.finish_reason;
    }
}
check('openai stream: greedy text equals pooled run', text === expect, [text, expect]);
check('openai stream: several chunks', chunks > 3, chunks);
check('openai stream: include_usage', usage && usage.prompt_tokens === nPrompt && usage.completion_tokens === nGen, usage);
check('openai stream: finish_reason', finish === r1.choices[0].finish_reason, finish);

// a stop string: the text before it, the stop itself not returned
const stop = expect.slice(2, 7); // (spans two of the ids here: "attr" "attr")
const want = expect.slice(0, expect.indexOf(stop));
const r2 = await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: maxTokens, stop: [stop] });
check('openai stop: text before the stop string', r2.choices[0].message.content === want, [r2.choices[0].message.content, want]);
check('openai stop: finish_reason stop', r2.choices[0].finish_reason === 'stop', r2.choices[0].finish_reason);
text = '';
for await (const c of await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: maxTokens, stop, stream: true }))
    for (const ch of c.choices) text += ch.delta?.content ?? '';
check('openai stop, streamed: text before the stop string', text === want, [text, want]);
// a stop string that the text's end only begins: held back while it might come, then
// given whole when the generation ends (streamed too)
const tailStop = expect.slice(-3) + '\u0001';
const r2b = await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: maxTokens, stop: [tailStop] });
check('openai stop begun at the end: the whole text', r2b.choices[0].message.content === expect,
      [r2b.choices[0].message.content, expect]);
text = '';
for await (const c of await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: maxTokens, stop: [tailStop], stream: true }))
    for (const ch of c.choices) text += ch.delta?.content ?? '';
check('openai stop begun at the end, streamed: the whole text', text === expect, [text, expect]);

// logprobs: at temperature 0 the chosen id is the most likely one; values are <= 0; the
// tokens' bytes make up the text; the stream carries the same ones
const nLp = 8;
const lp1 = await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: nLp, logprobs: true, top_logprobs: 5 });
const lpc = lp1.choices[0].logprobs?.content ?? [];
check('logprobs: one entry per generated id', lpc.length === lp1.usage.completion_tokens && lpc.length > 0, lp1.choices[0].logprobs);
check('logprobs: the greedy text is unchanged', expect.startsWith(lp1.choices[0].message.content) &&
      lp1.choices[0].message.content.length > 0, [lp1.choices[0].message.content, expect]);
check('logprobs: the bytes make up the text',
      Buffer.from(lpc.flatMap((t) => t.bytes)).toString('utf8') === lp1.choices[0].message.content, lpc.map((t) => t.token));
check('logprobs: top_logprobs has 5, most likely first', lpc.every((t) => t.top_logprobs.length === 5 &&
      t.top_logprobs.every((a, i) => i === 0 || a.logprob <= t.top_logprobs[i - 1].logprob)), lpc[0]);
check('logprobs: values <= 0', lpc.every((t) => t.logprob <= 0 && t.top_logprobs.every((a) => a.logprob <= 0)), lpc[0]);
check('logprobs: greedy picks the largest', lpc.every((t) => t.logprob === t.top_logprobs[0].logprob &&
      t.top_logprobs.every((a) => a.logprob <= t.logprob)), lpc);
check('logprobs: a real distribution (the top 5 hold at most all of it)', lpc.every((t) =>
      t.top_logprobs.reduce((s, a) => s + Math.exp(a.logprob), 0) <= 1.0001), lpc[0]);
const lps = [];
for await (const c of await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: nLp, logprobs: true, top_logprobs: 5, stream: true }))
    for (const ch of c.choices) lps.push(...(ch.logprobs?.content ?? []));
check('logprobs, streamed: the same entries', JSON.stringify(lps) === JSON.stringify(lpc), [lps.length, lpc.length]);
check('no logprobs asked: null', r1.choices[0].logprobs === null, r1.choices[0].logprobs);
await expectError('top_logprobs 21', OpenAI.BadRequestError, 400,
                  () => oa.chat.completions.create({ model, messages, max_tokens: 2, logprobs: true, top_logprobs: 21 }));

// responses: greedy text and usage as chat.completions gives them, whole and streamed
const final = nGen === maxTokens ? 'incomplete' : 'completed';
const rr = await oa.responses.create({ model, instructions: system, input: rest, temperature: 0, max_output_tokens: maxTokens });
check('responses: greedy text equals chat.completions', rr.output_text === expect, [rr.output_text, expect]);
check('responses: one message with one output_text', rr.output.length === 1 && rr.output[0].type === 'message' &&
      rr.output[0].content.length === 1 && rr.output[0].content[0].type === 'output_text', rr.output);
check('responses: usage', rr.usage.input_tokens === nPrompt && rr.usage.output_tokens === nGen &&
      rr.usage.total_tokens === nPrompt + nGen, rr.usage);
check('responses: status', rr.status === final, [rr.status, rr.incomplete_details]);
const rr2 = await oa.responses.create({ model, instructions: system, input: rest[0].content, temperature: 0, max_output_tokens: maxTokens });
check('responses: input as a string', rr2.output_text === expect, rr2.output_text);
const revs = [];
let rtext = '', rdone = null, rlast = null;
for await (const e of await oa.responses.create({ model, instructions: system, input: rest, temperature: 0,
                                                  max_output_tokens: maxTokens, stream: true })) {
    revs.push(e);
    if (e.type === 'response.output_text.delta') rtext += e.delta;
    if (e.type === 'response.output_text.done') rdone = e.text;
    rlast = e;
}
const rorder = revs.map((e) => e.type).filter((t, i, a) => t !== a[i - 1]).join(',');
check("responses stream: events in the API's order", rorder === ['response.created', 'response.in_progress',
      'response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
      `response.${final}`].join(','), rorder);
check('responses stream: sequence numbers 0, 1, 2, ...', revs.every((e, i) => e.sequence_number === i));
check('responses stream: greedy text equals chat.completions', rtext === expect && rdone === expect, [rtext, rdone, expect]);
check('responses stream: the last event has the response and usage', rlast?.response?.usage?.output_tokens === nGen &&
      rlast.response.output[0]?.content[0]?.text === expect, rlast);
await expectError('responses: an item of another type', OpenAI.BadRequestError, 400,
                  () => oa.responses.create({ model, input: [{ type: 'image_generation_call', id: 'x' }] }));
// responses' logprobs (include message.output_text.logprobs, top_logprobs): chat's entries
const rlp = await oa.responses.create({ model, instructions: system, input: rest, temperature: 0, max_output_tokens: nLp,
                                        include: ['message.output_text.logprobs'], top_logprobs: 5 });
const rlpc = rlp.output[0]?.content?.[0]?.logprobs ?? [];
check("responses logprobs: chat's entries", rlpc.length === lpc.length && JSON.stringify(rlpc) === JSON.stringify(lpc),
      [rlpc.length, lpc.length, rlpc[0]]);
const rlps = [];
let rlpdone = null;
for await (const e of await oa.responses.create({ model, instructions: system, input: rest, temperature: 0, max_output_tokens: nLp,
                                                  include: ['message.output_text.logprobs'], top_logprobs: 5, stream: true })) {
    if (e.type === 'response.output_text.delta') rlps.push(...(e.logprobs ?? []));
    if (e.type === 'response.output_text.done') rlpdone = e.logprobs;
}
check('responses logprobs, streamed: the same entries in the deltas and the done event',
      JSON.stringify(rlps) === JSON.stringify(lpc) && JSON.stringify(rlpdone) === JSON.stringify(lpc), [rlps.length, lpc.length]);
check('responses, no logprobs asked: empty', rr.output[0].content[0].logprobs.length === 0, rr.output[0].content[0].logprobs);
// the output items sent back as input (reasoning items included) continue the conversation
const rback = await oa.responses.create({ model, temperature: 0, max_output_tokens: 4, input: [...rest,
    { type: 'reasoning', id: 'rs_x', summary: [], content: [{ type: 'reasoning_text', text: 'Think.' }] }, ...rr.output,
    { role: 'user', content: 'And then?' }] });
check('responses: output items (and a reasoning item) sent back', rback.status !== 'failed' && rback.output.length >= 1 &&
      rback.usage.input_tokens > nPrompt + nGen, rback.usage);

// Anthropic, whole and streamed
const m1 = await an.messages.create({ model, system, messages: rest, max_tokens: maxTokens, temperature: 0 });
check('anthropic: greedy text equals pooled run', m1.content[0].type === 'text' && m1.content[0].text === expect, m1.content);
check('anthropic: usage', m1.usage.input_tokens === nPrompt && m1.usage.output_tokens === nGen, m1.usage);
check('anthropic: stop_reason', m1.stop_reason === (nGen === maxTokens ? 'max_tokens' : 'end_turn'), m1.stop_reason);
const events = [];
const st = an.messages.stream({ model, system: [{ type: 'text', text: system }], messages: rest, max_tokens: maxTokens, temperature: 0 });
st.on('streamEvent', (e) => events.push(e.type)); // (the SDK keeps ping to itself)
const m2 = await st.finalMessage();
check('anthropic stream: greedy text equals pooled run', m2.content[0].text === expect, m2.content);
check('anthropic stream: usage', m2.usage.input_tokens === nPrompt && m2.usage.output_tokens === nGen, m2.usage);
const order = events.filter((t, i) => t !== events[i - 1]).join(',');
check('anthropic stream: events in order', order ===
      'message_start,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop', order);
const m3 = await an.messages.create({ model, system, messages: rest, max_tokens: maxTokens, temperature: 0, stop_sequences: [stop] });
check('anthropic stop_sequences: text and reason', m3.content[0].text === want && m3.stop_reason === 'stop_sequence' &&
      m3.stop_sequence === stop, m3);
const ct = await an.messages.countTokens({ model, system, messages: rest });
check('anthropic count_tokens', ct.input_tokens === nPrompt, ct);

// errors as the SDKs' typed errors
const badOa = new OpenAI({ baseURL: `${chatUrl}/v1`, apiKey: 'wrong', maxRetries: 0 });
const badAn = new Anthropic({ baseURL: chatUrl, apiKey: 'wrong', maxRetries: 0 });
await expectError('openai wrong key', OpenAI.AuthenticationError, 401,
                  () => badOa.chat.completions.create({ model, messages, max_tokens: 2 }));
await expectError('anthropic wrong key', Anthropic.AuthenticationError, 401,
                  () => badAn.messages.create({ model, messages: rest, max_tokens: 2 }));
await expectError('openai n=2', OpenAI.BadRequestError, 400,
                  () => oa.chat.completions.create({ model, messages, max_tokens: 2, n: 2 }));
await expectError('openai wrong type', OpenAI.BadRequestError, 400,
                  () => oa.chat.completions.create({ model, messages, max_tokens: 2, temperature: 'hot' }));
await expectError('anthropic no max_tokens', Anthropic.BadRequestError, 400,
                  () => an.messages.create({ model, messages: rest }));
const long = 'the quick brown fox jumps over the lazy dog '.repeat(400);
await expectError('openai context overflow', OpenAI.BadRequestError, 400,
                  () => oa.chat.completions.create({ model, messages: [{ role: 'user', content: long }], max_tokens: 2 }));
await expectError('anthropic context overflow', Anthropic.BadRequestError, 400,
                  () => an.messages.create({ model, messages: [{ role: 'user', content: long }], max_tokens: 2 }));
await expectError('openai unknown route', OpenAI.NotFoundError, 404,
                  () => oa.embeddings.create({ model, input: 'x' }));

// a long stream: a second request meanwhile finds the queue full (--queue 0: 503); the
// client aborts; the generation stops at once and the next request is answered
const longStream = await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: 1900, stream: true });
let got = 0;
for await (const c of longStream) {
    if (++got === 3) {
        await expectError('queue full', OpenAI.InternalServerError, 503,
                          () => oa.chat.completions.create({ model, messages, max_tokens: 2 }));
        break; // aborts the request
    }
}
// the slot is free once the server has seen the hang-up and the generation its next id;
// until then (--queue 0) a request gets 503: asked again until answered, 10 s at most
const t0 = Date.now();
let r3 = null, busy = null;
while (!r3 && Date.now() - t0 < 10000) {
    try {
        r3 = await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: maxTokens });
    } catch (e) {
        if (e.status !== 503) throw e;
        busy = e.message;
        await new Promise((r) => setTimeout(r, 50));
    }
}
check('after an abort: the next request is answered', r3?.choices[0].message.content === expect, r3?.choices[0].message.content ?? busy);
check('after an abort: at once (the aborted generation stopped)', Date.now() - t0 < 10000, Date.now() - t0);

// completions on stories260K (no API key on that server)
const so = new OpenAI({ baseURL: `${storyUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
const storyUsage = [];
const c1 = await so.completions.create({ model, prompt: 'Once upon a time', temperature: 0, max_tokens: 40 });
storyUsage.push(c1.usage);
check('completions: greedy text equals pooled run', c1.choices[0].text === storyExpect, [c1.choices[0].text, storyExpect]);
text = '';
for await (const c of await so.completions.create({ model, prompt: 'Once upon a time', temperature: 0, max_tokens: 40, stream: true,
                                                   stream_options: { include_usage: true } })) {
    text += c.choices[0]?.text ?? '';
    if (c.usage) storyUsage.push(c.usage);
}
check('completions stream: greedy text equals pooled run', text === storyExpect, [text, storyExpect]);
const seeded = async () => {
    const r = await so.completions.create({ model, prompt: 'Once upon a time', temperature: 0.9, top_p: 0.9,
                                           seed: 7, max_tokens: 30, presence_penalty: 0.5 });
    storyUsage.push(r.usage);
    return r.choices[0].text;
};
check('completions: the same seed gives the same text', (await seeded()) === (await seeded()));
const cl = await so.completions.create({ model, prompt: 'Once upon a time', temperature: 0, max_tokens: 12, logprobs: 3 });
storyUsage.push(cl.usage);
const clp = cl.choices[0].logprobs;
check('completions logprobs: one per id, the text from the tokens', clp && clp.tokens.length === cl.usage.completion_tokens &&
      clp.tokens.join('') === cl.choices[0].text && storyExpect.startsWith(cl.choices[0].text), clp);
check('completions logprobs: greedy picks the largest of 3', clp && clp.top_logprobs.every((t, i) =>
      Object.keys(t).length === 3 && Object.values(t).every((v) => v <= clp.token_logprobs[i] && v <= 0)), clp);
check('completions logprobs: text_offset', clp && clp.text_offset.every((o, i) =>
      o === clp.tokens.slice(0, i).join('').length), clp?.text_offset);

// /metrics: Prometheus' text format, and the story server's counts exactly
const mdenied = await fetch(`${chatUrl}/metrics`);
check('metrics: the API key is needed', mdenied.status === 401, mdenied.status);
const mres = await fetch(`${storyUrl}/metrics`);
check('metrics: text/plain; version=0.0.4', mres.status === 200 &&
      /^text\/plain; version=0\.0\.4/.test(mres.headers.get('content-type')), mres.headers.get('content-type'));
const mtext = await mres.text();
const types = {}, samples = {};
let syntax = true;
for (const line of mtext.split('\n')) {
    if (line === '') continue;
    let m;
    if ((m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|summary|histogram|untyped)$/.exec(line))) types[m[1]] = m[2];
    else if (/^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* \S/.test(line)) continue;
    else if ((m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? (-?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?|NaN|[+-]Inf)$/.exec(line))) {
        const family = m[1].replace(/_(sum|count)$/, '');
        if (!(m[1] in types) && types[family] !== 'summary') { syntax = false; console.log(`FAIL: metrics: ${m[1]} has no TYPE before it`); }
        samples[m[1] + (m[2] ?? '')] = Number(m[3]);
    } else { syntax = false; console.log(`FAIL: metrics: not Prometheus text: ${JSON.stringify(line)}`); }
}
check('metrics: every line parses', syntax && Object.keys(samples).length > 0, mtext.slice(0, 300));
const sum = (f) => storyUsage.reduce((s, u) => s + u[f], 0);
check('metrics: generated tokens', samples.pooled_generated_tokens_total === sum('completion_tokens'), [samples.pooled_generated_tokens_total, sum('completion_tokens')]);
check('metrics: prompt tokens', samples.pooled_prompt_tokens_total === sum('prompt_tokens'), [samples.pooled_prompt_tokens_total, sum('prompt_tokens')]);
check('metrics: requests by route and status', samples['pooled_requests_total{route="/v1/completions",status="200"}'] === storyUsage.length, samples);
check('metrics: time to first token, one per generation', samples.pooled_time_to_first_token_seconds_count === storyUsage.length &&
      samples.pooled_time_to_first_token_seconds_sum > 0, samples);
check('metrics: decode tok/s', samples.pooled_decode_tokens_per_second > 0, samples);
check('metrics: queue and in flight idle', samples.pooled_queue_length === 0 && samples.pooled_requests_in_flight === 0, samples);

// tools round trip on a model whose chat template renders them (Qwen3's): tools, the
// assistant's call and the tool's result are accepted and answered, and the prompt holds
// as many ids as `pooled template` gives for the same conversation in Hugging Face's shapes
if (env.TOOLS_URL) {
    const to = new OpenAI({ baseURL: `${env.TOOLS_URL}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
    const ta = new Anthropic({ baseURL: env.TOOLS_URL, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
    const tools = JSON.parse(fs.readFileSync(env.TOOLS, 'utf8'));
    const nTool = Number(env.TOOL_N_PROMPT);
    const fn = tools[0].function;
    const oaMsgs = [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
          function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }];
    const okFinish = ['stop', 'length', 'tool_calls'];
    const t1 = await to.chat.completions.create({ model, messages: oaMsgs, tools, tool_choice: 'auto', temperature: 0, max_tokens: 4 });
    check('openai tools: prompt as pooled template renders it', t1.usage.prompt_tokens === nTool, [t1.usage, nTool]);
    check('openai tools: answered', t1.choices[0].message.role === 'assistant' && okFinish.includes(t1.choices[0].finish_reason), t1.choices[0]);
    let tfinish = null, tusage = null;
    for await (const c of await to.chat.completions.create({ model, messages: oaMsgs, tools, temperature: 0, max_tokens: 4,
                                                             stream: true, stream_options: { include_usage: true } })) {
        if (c.usage) tusage = c.usage;
        for (const ch of c.choices) if (ch.finish_reason) tfinish = ch.finish_reason;
    }
    check('openai tools, streamed: answered', okFinish.includes(tfinish) && tusage?.prompt_tokens === nTool, [tfinish, tusage]);
    const anMsgs = [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] }];
    const anTools = [{ name: fn.name, description: fn.description, input_schema: fn.parameters }];
    const a1 = await ta.messages.create({ model, messages: anMsgs, tools: anTools, tool_choice: { type: 'auto' }, max_tokens: 4, temperature: 0 });
    check('anthropic tools: prompt as pooled template renders it', a1.usage.input_tokens === nTool, [a1.usage, nTool]);
    check('anthropic tools: answered', a1.role === 'assistant' && ['end_turn', 'max_tokens', 'tool_use'].includes(a1.stop_reason), a1);
    const a2 = await ta.messages.stream({ model, messages: anMsgs, tools: anTools, max_tokens: 4, temperature: 0 }).finalMessage();
    check('anthropic tools, streamed: answered', a2.usage.input_tokens === nTool && a2.content.length >= 1, a2);
    const ct1 = await ta.messages.countTokens({ model, messages: anMsgs, tools: anTools });
    const ct0 = await ta.messages.countTokens({ model, messages: anMsgs });
    check('anthropic count_tokens: the tools are in the prompt', ct1.input_tokens === nTool && ct0.input_tokens < nTool, [ct1, ct0]);
    await expectError('openai tool_choice of an unknown function', OpenAI.BadRequestError, 400,
                      () => to.chat.completions.create({ model, messages: oaMsgs, tools, max_tokens: 2,
                                                         tool_choice: { type: 'function', function: { name: 'nope' } } }));
    await expectError('anthropic tool_use without input_schema', Anthropic.BadRequestError, 400,
                      () => ta.messages.create({ model, messages: anMsgs, tools: [{ name: 'x' }], max_tokens: 2 }));
    // tool_choice required / named forces one call through the tools' schemas (bounded ones:
    // a free string of a random-weights model need not end); then the call and its result
    // sent back get an answer
    const fTools = [
        { type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
          properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer' } },
          required: ['city', 'days'] } } },
        { type: 'function', function: { name: 'now', parameters: { type: 'object',
          properties: { utc: { type: 'boolean' } }, required: ['utc'] } } }];
    const fits = (name, args) => name === 'get_weather'
        ? ['Paris', 'Oslo'].includes(args?.city) && Number.isInteger(args?.days)
        : name === 'now' && typeof args?.utc === 'boolean';
    const ask = [{ role: 'user', content: 'Weather in Paris?' }];
    const fArgs = (s) => { try { return JSON.parse(s); } catch { return null; } };
    for (const [choice, want] of [['required', null], [{ type: 'function', function: { name: 'now' } }, 'now']]) {
        const what = `openai forced ${want ?? 'required'}`;
        const f1 = await to.chat.completions.create({ model, messages: ask, tools: fTools, tool_choice: choice, temperature: 0, max_tokens: 64 });
        const c1 = f1.choices[0].message.tool_calls?.[0];
        check(`${what}: a call`, f1.choices[0].finish_reason === 'tool_calls' && c1 && (!want || c1.function.name === want) &&
              fits(c1.function.name, fArgs(c1.function.arguments)), f1.choices[0]);
        let sname = '', sargs = '', sfinish = null;
        for await (const c of await to.chat.completions.create({ model, messages: ask, tools: fTools, tool_choice: choice,
                                                                 max_tokens: 64, stream: true })) {
            for (const ch of c.choices) {
                if (ch.finish_reason) sfinish = ch.finish_reason;
                for (const tc of ch.delta?.tool_calls ?? []) sname += tc.function?.name ?? '', sargs += tc.function?.arguments ?? '';
            }
        }
        check(`${what}, streamed: a call`, sfinish === 'tool_calls' && (!want || sname === want) && fits(sname, fArgs(sargs)),
              [sfinish, sname, sargs]);
        if (!c1) continue;
        const f2 = await to.chat.completions.create({ model, temperature: 0, max_tokens: 4, tools: fTools, messages: [...ask,
            { role: 'assistant', content: null, tool_calls: [c1] }, { role: 'tool', tool_call_id: c1.id, content: '18 C' }] });
        check(`${what}: the result answered`, f2.choices[0].message.role === 'assistant' && okFinish.includes(f2.choices[0].finish_reason) &&
              f2.usage.prompt_tokens > f1.usage.prompt_tokens, f2);
    }
    const aTools = fTools.map((t) => ({ name: t.function.name, input_schema: t.function.parameters }));
    for (const [choice, want] of [[{ type: 'any' }, null], [{ type: 'tool', name: 'get_weather' }, 'get_weather']]) {
        const what = `anthropic forced ${want ?? 'any'}`;
        const m1 = await ta.messages.create({ model, messages: ask, tools: aTools, tool_choice: choice, max_tokens: 64, temperature: 0 });
        const u1 = m1.content.find((b) => b.type === 'tool_use');
        check(`${what}: a tool_use`, m1.stop_reason === 'tool_use' && u1 && (!want || u1.name === want) && fits(u1.name, u1.input), m1);
        const m2 = await ta.messages.stream({ model, messages: ask, tools: aTools, tool_choice: choice, max_tokens: 64 }).finalMessage();
        const u2 = m2.content.find((b) => b.type === 'tool_use');
        check(`${what}, streamed: a tool_use`, m2.stop_reason === 'tool_use' && u2 && (!want || u2.name === want) && fits(u2.name, u2.input), m2);
        if (!u1) continue;
        const m3 = await ta.messages.create({ model, max_tokens: 4, temperature: 0, tools: aTools, messages: [...ask,
            { role: 'assistant', content: [u1] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: u1.id, content: '18 C' }] }] });
        check(`${what}: the result answered`, m3.role === 'assistant' && ['end_turn', 'max_tokens', 'tool_use'].includes(m3.stop_reason) &&
              m3.usage.input_tokens > m1.usage.input_tokens, m3);
    }
    // the Responses API: flat tools, tool_choice required / {type: function, name}; the call
    // comes as a function_call item (whole and streamed: its arguments' delta events), and
    // the item with its function_call_output sent back as input gets an answer
    const rTools = fTools.map((t) => ({ type: 'function', name: t.function.name, parameters: t.function.parameters }));
    for (const [choice, want] of [['required', null], [{ type: 'function', name: 'now' }, 'now']]) {
        const what = `responses forced ${want ?? 'required'}`;
        const r1 = await to.responses.create({ model, input: ask, tools: rTools, tool_choice: choice, temperature: 0, max_output_tokens: 64 });
        const c1 = r1.output.find((o) => o.type === 'function_call');
        check(`${what}: a function_call item`, r1.status === 'completed' && c1 && (!want || c1.name === want) &&
              fits(c1.name, fArgs(c1.arguments)) && typeof c1.call_id === 'string', r1.output);
        let sargs = '', sdone = null, slast = null;
        for await (const e of await to.responses.create({ model, input: ask, tools: rTools, tool_choice: choice, temperature: 0,
                                                          max_output_tokens: 64, stream: true })) {
            if (e.type === 'response.function_call_arguments.delta') sargs += e.delta;
            if (e.type === 'response.output_item.done' && e.item.type === 'function_call') sdone = e.item;
            slast = e;
        }
        check(`${what}, streamed: the call's events`, sdone && (!want || sdone.name === want) && fits(sdone.name, fArgs(sargs)) &&
              sargs === sdone.arguments && slast?.type === 'response.completed' &&
              slast.response.output.some((o) => o.type === 'function_call' && o.call_id === sdone.call_id), [sargs, sdone, slast]);
        if (!c1) continue;
        const r2 = await to.responses.create({ model, temperature: 0, max_output_tokens: 4, tools: rTools,
            input: [...ask, c1, { type: 'function_call_output', call_id: c1.call_id, output: '18 C' }] });
        check(`${what}: the output answered`, r2.output[0]?.type === 'message' && r2.usage.input_tokens > r1.usage.input_tokens, r2);
    }
    await expectError('openai forced call, a schema outside the subset', OpenAI.BadRequestError, 400,
                      () => to.chat.completions.create({ model, messages: ask, max_tokens: 2, tool_choice: 'required',
                          tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object',
                              properties: { s: { type: 'string', pattern: 'x' } } } } }] }));
} else check('tools server', false, 'TOOLS_URL not set');

console.log(`RESULT ${passed} ${failed}`);
