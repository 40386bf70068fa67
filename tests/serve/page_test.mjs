// page_test.mjs - the chat page's markdown renderer (serve/page/markdown.js) under node, on
// ordinary and hostile model output: the result's only tags and attributes are the ones
// the renderer makes (links http/https only), and every character of the text shows up
// escaped. Run by tests/e2e/serve_test.sh; one "FAIL" line per failed check, then
// "RESULT passed failed".
import fs from 'node:fs';

const src = fs.readFileSync(new URL('../../serve/page/markdown.js', import.meta.url), 'utf8');
const renderMarkdown = new Function(src + '\nreturn renderMarkdown;')();

let passed = 0, failed = 0;
function check(what, cond, detail) {
    if (cond) passed++;
    else { failed++; console.log(`FAIL: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail).slice(0, 400)}`); }
}

const allowed = { p: [], br: [], h1: [], h2: [], h3: [], h4: [], h5: [], h6: [], ul: [], ol: [], li: [],
                  pre: [], code: ['class'], strong: [], em: [], a: ['href', 'rel', 'target'] };
// Every tag in html is one the renderer makes, with only its attributes, each quoted and
// free of markup; links go to http(s) only; no stray < or > outside tags.
function safe(html) {
    const bad = [];
    const rest = html.replace(/<(\/?)([a-z0-9]+)((?:\s+[a-z]+="[^"<>]*")*)\s*>/g, (m, close, tag, attrs) => {
        if (!(tag in allowed)) bad.push('tag ' + tag);
        for (const a of attrs.matchAll(/([a-z]+)="([^"]*)"/g)) {
            if (close || !allowed[tag]?.includes(a[1])) bad.push('attribute ' + a[1] + ' on ' + tag);
            if (a[1] === 'href' && !/^https?:\/\//i.test(a[2])) bad.push('href ' + a[2]);
            if (a[1] === 'class' && !/^lang-[\w+.-]+$/.test(a[2])) bad.push('class ' + a[2]);
        }
        return '';
    });
    if (/[<>]/.test(rest)) bad.push('a raw < or > outside the tags');
    return bad;
}

const hostile = [
    '<script>alert(1)</script>',
    '<img src=x onerror=alert(1)>',
    '"><svg onload=alert(1)>',
    '[click](javascript:alert(1))',
    '[click](JaVaScRiPt:alert(1))',
    '[click](data:text/html,<script>alert(1)</script>)',
    '[x](http://a.example/"onmouseover="alert(1))',
    '[x](http://a.example/*b*c*)',
    '**<b>bold</b>** and *<i onclick=x>*',
    '`</code><script>alert(1)</script>`',
    '```"><script>alert(1)</script>\n<img src=x onerror=alert(1)>\n```',
    '```js onload=x\ncode\n```',
    '# <iframe src=javascript:alert(1)>',
    '- <a href="javascript:alert(1)">x</a>\n1. <style>*{}</style>',
    'a\u0000<script>b',
    '&lt;script&gt; already escaped &amp; once',
    "' onfocus='alert(1)' autofocus='",
];
for (const h of hostile) {
    const out = renderMarkdown(h);
    check(`hostile ${JSON.stringify(h)}: only the renderer's own markup`, safe(out).length === 0, [safe(out), out]);
    const tags = (out.match(/<[^>]*>/g) || []).join(' ');
    check(`hostile ${JSON.stringify(h)}: no script, handler or javascript: in a tag`,
          !/script|<img|<svg|<iframe|<style|\son[a-z]+=|javascript:|data:/i.test(tags), tags);
}
check('already-escaped text is escaped again (shown as typed)',
      renderMarkdown('&lt;b&gt;').includes('&amp;lt;b&amp;gt;'), renderMarkdown('&lt;b&gt;'));

// ordinary markdown
const md = renderMarkdown('# Title\n\nSome **bold**, *it* and `x < y`.\n\n- one\n- two\n\n```c\nint a = 1 < 2;\n```\n[site](https://example.org/a?b=1&c=2)');
check('heading', md.includes('<h1>Title</h1>'), md);
check('bold, italic, inline code escaped', md.includes('<strong>bold</strong>') && md.includes('<em>it</em>') &&
      md.includes('<code>x &lt; y</code>'), md);
check('list', md.includes('<ul><li>one</li><li>two</li></ul>'), md);
check('code block with its language, escaped', md.includes('<pre><code class="lang-c">int a = 1 &lt; 2;</code></pre>'), md);
check('an https link', md.includes('<a href="https://example.org/a?b=1&amp;c=2" rel="noopener noreferrer" target="_blank">site</a>'), md);
check('ordinary markdown is safe too', safe(md).length === 0, safe(md));
const open = renderMarkdown('text\n```py\nwhile streaming <');
check('an unclosed fence (still streaming) is code', open.includes('<pre><code class="lang-py">while streaming &lt;</code></pre>'), open);

console.log(`RESULT ${passed} ${failed}`);
