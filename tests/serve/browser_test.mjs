// browser_test.mjs - the chat page in a real headless browser (Debian's chromium driven by
// npm playwright-core, pinned in package.json): it loads under its Content-Security-Policy
// without errors, asks for the API key and shows the model, a message streams into the
// page, the stop button stops it and the server cancels that generation. Run by
// tests/e2e/serve_test.sh with CHAT_URL, KEY and LOG (the server's stderr: one line per
// generation, ending with how it ended) against a server started with --ignore-eos and a
// long --ctx, so that no reply can end on its own before the page's stop: a tiny random
// model samples its end-of-turn id at any time, and CI's loaded cores make the page slow.
// Every wait is for a condition with a deadline (CI: two slow cores, tests two at a time,
// sanitizer builds), never a fixed number of polls. One "FAIL" line per failed check, then
// "RESULT passed failed".
import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const url = process.env.CHAT_URL, key = process.env.KEY, log = process.env.LOG;
const DEADLINE = 30000; // ms for each wait on the page or the server
let passed = 0, failed = 0;
function check(what, cond, detail) {
    if (cond) passed++;
    else { failed++; console.log(`FAIL: browser: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail).slice(0, 300)}`); }
}

// the server's generations so far: its log lines "pooled serve: chat ID: ..., REASON"
const generations = () => readFileSync(log, 'utf8').split('\n').filter((l) => l.startsWith('pooled serve: chat '));

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
                                        args: ['--no-sandbox', '--disable-gpu'], timeout: DEADLINE });
try {
    const page = await browser.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push('error: ' + e.message));
    page.on('console', (m) => { if (/Content Security Policy|Refused/i.test(m.text())) problems.push(m.text()); });
    await page.goto(url + '/', { timeout: DEADLINE });
    await page.waitForSelector('#keyrow:not([hidden])', { timeout: DEADLINE });
    check('it asks for the API key', true);
    await page.fill('#key', key);
    await page.dispatchEvent('#key', 'change');
    await page.waitForFunction(() => document.getElementById('model').textContent.endsWith('.gguf'), null, { timeout: DEADLINE });
    check('the model is shown', (await page.textContent('#model')) === 'qwen3-q8_0.gguf', await page.textContent('#model'));

    // a reply streams in (more than one update), then Stop ends it, the server cancels that
    // generation (it cannot end otherwise: --ignore-eos, a long --ctx) while the page is still
    // open, and the page is ready again
    const before = generations().length;
    await page.fill('#input', 'Write a long story.');
    await page.click('#send');
    const sizes = new Set();
    for (const end = Date.now() + DEADLINE; sizes.size < 3 && Date.now() < end;) {
        sizes.add((await page.textContent('.msg.assistant')) ?? '');
        await page.waitForTimeout(25);
    }
    check('the reply streams (the text grows)', sizes.size >= 3, [...sizes].slice(0, 3));
    check('the stop button is enabled while it streams', await page.isEnabled('#stop'));
    await page.click('#stop');
    await page.waitForFunction(() => document.getElementById('status').textContent === 'stopped', null,
                               { timeout: DEADLINE }).catch(() => {}); // (checked next, and the server's side too)
    check('stopped', (await page.textContent('#status')) === 'stopped');
    let ended = generations().slice(before);
    for (const end = Date.now() + DEADLINE; !ended.length && Date.now() < end; ended = generations().slice(before))
        await new Promise((r) => setTimeout(r, 50));
    check("the page's stop cancelled the generation (before the page closed)",
          ended.length === 1 && ended[0].endsWith(' cancelled'),
          ended.length ? ended : `the server still generates ${DEADLINE} ms after the stop`);
    check('send is enabled again, stop disabled', (await page.isEnabled('#send')) && !(await page.isEnabled('#stop')));
    check('the speed is shown', /tok\/s$/.test(await page.textContent('#speed')), await page.textContent('#speed'));
    check('the user message is shown as text', (await page.textContent('.msg.user')) === 'Write a long story.');
    check('no page error and no CSP violation', problems.length === 0, problems);
} catch (e) {
    check('the page test ran to its end', false, e.message);
} finally {
    await browser.close();
}
console.log(`RESULT ${passed} ${failed}`);
