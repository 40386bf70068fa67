// browser_test.mjs - the chat page in a real headless browser (Debian's chromium driven by
// npm playwright-core, pinned in package.json): it loads under its Content-Security-Policy
// without errors, asks for the API key and shows the model, a message streams into the
// page, the stop button stops it (the server cancels the generation). Run by
// tests/e2e/serve_test.sh with CHAT_URL and KEY; one "FAIL" line per failed check, then
// "RESULT passed failed".
import { chromium } from 'playwright-core';

const url = process.env.CHAT_URL, key = process.env.KEY;
let passed = 0, failed = 0;
function check(what, cond, detail) {
    if (cond) passed++;
    else { failed++; console.log(`FAIL: browser: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail).slice(0, 300)}`); }
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
                                        args: ['--no-sandbox', '--disable-gpu'], timeout: 30000 });
try {
    const page = await browser.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push('error: ' + e.message));
    page.on('console', (m) => { if (/Content Security Policy|Refused/i.test(m.text())) problems.push(m.text()); });
    await page.goto(url + '/', { timeout: 15000 });
    await page.waitForSelector('#keyrow:not([hidden])', { timeout: 10000 });
    check('it asks for the API key', true);
    await page.fill('#key', key);
    await page.dispatchEvent('#key', 'change');
    await page.waitForFunction(() => document.getElementById('model').textContent.endsWith('.gguf'), null, { timeout: 10000 });
    check('the model is shown', (await page.textContent('#model')) === 'qwen3-q8_0.gguf', await page.textContent('#model'));

    // a reply streams in (more than one update), then Stop ends it and the page is ready again
    await page.fill('#input', 'Write a long story.');
    await page.click('#send');
    const sizes = new Set();
    for (let i = 0; i < 200 && sizes.size < 3; i++) {
        sizes.add((await page.textContent('.msg.assistant')) ?? '');
        await page.waitForTimeout(25);
    }
    check('the reply streams (the text grows)', sizes.size >= 3, [...sizes].slice(0, 3));
    check('the stop button is enabled while it streams', await page.isEnabled('#stop'));
    await page.click('#stop');
    await page.waitForFunction(() => document.getElementById('status').textContent === 'stopped', null, { timeout: 10000 });
    check('stopped', (await page.textContent('#status')) === 'stopped');
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
