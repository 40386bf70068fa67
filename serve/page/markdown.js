// markdown.js - the chat page's markdown renderer: a pure function from the model's text
// to HTML. Every piece of the text is escaped before any markup is added, so the only
// tags in the result are the ones made here (p, br, h1-h6, ul, ol, li, pre, code, strong,
// em, a) and the only attributes class (a sanitised language name), and on links href (http
// and https only), rel and target. tests/serve/page_test.mjs checks it on hostile input.
'use strict';

function escapeHtml(s) {
    return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
        .replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

// Links, bold and italic on text that is already escaped (it holds no < > " '). Links are
// set aside first so that emphasis never reaches into an address.
function emphasis(e) {
    const links = [];
    e = e.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (m, label, url) => {
        if (!/^https?:\/\//i.test(url)) return label;
        links.push('<a href="' + url + '" rel="noopener noreferrer" target="_blank">' + label + '</a>');
        return '\u0000' + (links.length - 1) + '\u0000';
    });
    e = e.replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>');
    e = e.replace(/(^|[^*])\*([^*\s][^*]*)\*/g, '$1<em>$2</em>');
    return e.replace(/\u0000(\d+)\u0000/g, (m, i) => links[Number(i)]);
}

// One line's inline markup: `code` spans first, the rest escaped then emphasised.
function inline(text) {
    const parts = text.split('`');
    let out = '';
    for (let i = 0; i < parts.length; i++) {
        const e = escapeHtml(parts[i]);
        if (i % 2 === 1 && i < parts.length - 1) out += '<code>' + e + '</code>';
        else out += (i % 2 === 1 ? '`' : '') + emphasis(e);
    }
    return out;
}

function renderMarkdown(text) {
    const lines = String(text).replace(/\u0000/g, '').split('\n');
    let html = '', para = [], list = null;
    const endPara = () => { if (para.length) html += '<p>' + para.join('<br>') + '</p>'; para = []; };
    const endList = () => { if (list) html += '</' + list + '>'; list = null; };
    for (let i = 0; i < lines.length; i++) {
        const line = lines[i];
        const fence = /^\s*```\s*([\w+.-]*)/.exec(line);
        if (fence) { // a code block, to its closing fence or the end (still streaming)
            endPara(); endList();
            const code = [];
            for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i]);
            const lang = fence[1] ? ' class="lang-' + escapeHtml(fence[1]) + '"' : '';
            html += '<pre><code' + lang + '>' + escapeHtml(code.join('\n')) + '</code></pre>';
            continue;
        }
        const h = /^(#{1,6})\s+(.*)$/.exec(line);
        const li = /^\s*(?:[-*+]|(\d+)\.)\s+(.*)$/.exec(line);
        if (h) {
            endPara(); endList();
            html += '<h' + h[1].length + '>' + inline(h[2]) + '</h' + h[1].length + '>';
        } else if (li) {
            endPara();
            const kind = li[1] === undefined ? 'ul' : 'ol';
            if (list !== kind) { endList(); html += '<' + kind + '>'; list = kind; }
            html += '<li>' + inline(li[2]) + '</li>';
        } else if (/^\s*$/.test(line)) {
            endPara(); endList();
        } else {
            endList();
            para.push(inline(line));
        }
    }
    endPara(); endList();
    return html;
}
