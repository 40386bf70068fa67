// json_schema.mjs - `pooled serve`'s response_format (and the Responses API's text.format)
// through the OpenAI client library: json_schema answers (random weights, several seeds,
// whole and streamed) parse with JSON.parse and hold the schema's fields and types;
// json_object cut by max_tokens says
// "length"; a schema the server refuses is the SDK's BadRequestError. Run by
// tests/e2e/serve_json_test.sh; prints FAIL lines and ends with "RESULT passed failed".
import OpenAI from 'openai';

let passed = 0, failed = 0;
function check(what, cond, detail) {
    if (cond) passed++;
    else { failed++; console.log(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail).slice(0, 400)}`); }
}
for (const ev of ['uncaughtException', 'unhandledRejection'])
    process.on(ev, (e) => {
        console.log(`FAIL: ${e?.constructor?.name} ${e?.status ?? ''} ${e?.message}`);
        console.log(`RESULT ${passed} ${failed + 1}`);
        process.exit(1);
    });

const oa = new OpenAI({ baseURL: `${process.env.URL}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
const model = 'any', messages = [{ role: 'user', content: 'Describe a thing as JSON.' }];
const schema = {
    type: 'object',
    properties: {
        id: { type: 'integer' },
        score: { type: 'number' },
        ok: { type: 'boolean' },
        color: { enum: ['red', 'green', 'blue'] },
        tags: { type: 'array', items: { anyOf: [{ type: 'null' }, { type: 'integer' }] }, minItems: 1, maxItems: 3 },
        child: { type: 'object', properties: { a: { type: 'boolean' } }, required: ['a'], additionalProperties: false },
    },
    required: ['id', 'ok', 'color', 'tags', 'child'],
    additionalProperties: false,
};
const response_format = { type: 'json_schema', json_schema: { name: 'thing', strict: true, schema } };

// the schema's rules, checked by hand
function valid(v) {
    const keys = Object.keys(v ?? {});
    return typeof v === 'object' && v !== null && !Array.isArray(v) &&
        keys.every((k) => k in schema.properties) &&
        schema.required.every((k) => k in v) &&
        Number.isInteger(v.id) &&
        (!('score' in v) || Number.isFinite(v.score)) &&
        typeof v.ok === 'boolean' &&
        ['red', 'green', 'blue'].includes(v.color) &&
        Array.isArray(v.tags) && v.tags.length >= 1 && v.tags.length <= 3 &&
        v.tags.every((t) => t === null || Number.isInteger(t)) &&
        typeof v.child === 'object' && Object.keys(v.child).join() === 'a' && typeof v.child.a === 'boolean';
}

for (const seed of [1, 2, 3]) {
    const r = await oa.chat.completions.create({ model, messages, seed, temperature: 1, max_tokens: 200, response_format });
    const text = r.choices[0].message.content;
    let v = null;
    try { v = JSON.parse(text); } catch (e) { check(`seed ${seed}: JSON.parse`, false, text); }
    check(`seed ${seed}: finish_reason stop`, r.choices[0].finish_reason === 'stop', r.choices[0].finish_reason);
    check(`seed ${seed}: the schema's fields and types`, v !== null && valid(v), text);
    let streamed = '';
    for await (const c of await oa.chat.completions.create({ model, messages, seed, temperature: 1, max_tokens: 200,
                                                             response_format, stream: true }))
        for (const ch of c.choices) streamed += ch.delta?.content ?? '';
    check(`seed ${seed}: streamed, the same JSON`, streamed === text, [streamed, text]);
}

// the Responses API's text.format: the same answer as chat's for the same seed (one
// grammar, one sampler), whole and streamed; echoed in the response; the SDK's
// output_parsed gives the parsed object
const format = { type: 'json_schema', name: 'thing', strict: true, schema };
for (const seed of [1, 2]) {
    const c = await oa.chat.completions.create({ model, messages, seed, temperature: 1, max_tokens: 200, response_format });
    const r = await oa.responses.parse({ model, input: messages, seed, temperature: 1, max_output_tokens: 200, text: { format } });
    check(`responses seed ${seed}: chat's JSON`, r.output_text === c.choices[0].message.content, [r.output_text, c.choices[0].message.content]);
    check(`responses seed ${seed}: output_parsed holds the schema`, valid(r.output_parsed), r.output_parsed);
    check(`responses seed ${seed}: the format echoed`, r.text?.format?.type === 'json_schema' && r.text.format.name === 'thing' &&
          r.text.format.schema?.required?.length === schema.required.length, r.text);
    let streamed = '';
    for await (const e of await oa.responses.create({ model, input: messages, seed, temperature: 1, max_output_tokens: 200,
                                                      text: { format }, stream: true }))
        if (e.type === 'response.output_text.delta') streamed += e.delta;
    check(`responses seed ${seed}: streamed, the same JSON`, streamed === r.output_text, [streamed, r.output_text]);
}
try {
    await oa.responses.create({ model, input: messages, max_output_tokens: 5,
                                text: { format: { type: 'json_schema', name: 'bad', schema: { type: 'string', pattern: 'a+' } } } });
    check('responses, an unsupported schema: refused', false);
} catch (e) {
    check('responses, an unsupported schema: BadRequestError', e instanceof OpenAI.BadRequestError && /pattern/.test(e.message),
          `${e.constructor.name} ${e.message}`);
}

const cut = await oa.chat.completions.create({ model, messages, temperature: 0, max_tokens: 6,
                                               response_format: { type: 'json_object' } });
check('json_object cut by max_tokens: finish_reason length', cut.choices[0].finish_reason === 'length', cut.choices[0]);
check('json_object cut by max_tokens: the text begins the object', cut.choices[0].message.content.startsWith('{'),
      cut.choices[0].message.content);

try {
    await oa.chat.completions.create({ model, messages, max_tokens: 5, response_format: { type: 'json_schema',
        json_schema: { name: 'bad', schema: { type: 'string', pattern: 'a+' } } } });
    check('an unsupported schema: refused', false);
} catch (e) {
    check('an unsupported schema: BadRequestError', e instanceof OpenAI.BadRequestError, `${e.constructor.name} ${e.message}`);
    check('an unsupported schema: the keyword named', /pattern/.test(e.message), e.message);
}
console.log(`RESULT ${passed} ${failed}`);
