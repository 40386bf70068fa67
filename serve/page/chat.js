// chat.js - the chat page: a conversation with the served model through
// /v1/chat/completions (server-sent events), a stop button that aborts the request, the
// model's name and the decode speed. Model text reaches the page only through
// renderMarkdown (markdown.js), which escapes it; everything else is set as textContent.
'use strict';

const $ = (id) => document.getElementById(id);
const conversation = [];
let controller = null;

function headers() {
    const h = { 'Content-Type': 'application/json' };
    const key = $('key').value || localStorage.getItem('pooled-key') || '';
    if (key) h.Authorization = 'Bearer ' + key;
    return h;
}

function bubble(role) {
    const div = document.createElement('div');
    div.className = 'msg ' + role;
    $('log').appendChild(div);
    return div;
}

function status(text) { $('status').textContent = text; }

async function loadModel() {
    try {
        const r = await fetch('/v1/models', { headers: headers() });
        if (r.status === 401) { $('keyrow').hidden = false; status('this server needs an API key'); return; }
        const j = await r.json();
        $('model').textContent = j.data && j.data[0] ? j.data[0].id : '?';
    } catch (e) {
        status('cannot reach the server: ' + e.message);
    }
}

async function send() {
    const text = $('input').value.trim();
    if (!text || controller) return;
    $('input').value = '';
    conversation.push({ role: 'user', content: text });
    bubble('user').textContent = text;
    const out = bubble('assistant');
    controller = new AbortController();
    $('send').disabled = true;
    $('stop').disabled = false;
    let reply = '', pieces = 0, tFirst = 0, usage = null;
    const t0 = performance.now();
    try {
        const r = await fetch('/v1/chat/completions', {
            method: 'POST', headers: headers(), signal: controller.signal,
            body: JSON.stringify({ messages: conversation, stream: true, stream_options: { include_usage: true } }),
        });
        if (!r.ok) {
            const j = await r.json().catch(() => ({}));
            throw new Error((j.error && j.error.message) || ('HTTP ' + r.status));
        }
        const reader = r.body.getReader(), dec = new TextDecoder();
        let buf = '';
        for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += dec.decode(value, { stream: true });
            let nl;
            while ((nl = buf.indexOf('\n\n')) >= 0) {
                const ev = buf.slice(0, nl);
                buf = buf.slice(nl + 2);
                if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
                const c = JSON.parse(ev.slice(6));
                if (c.error) throw new Error(c.error.message);
                if (c.usage) usage = c.usage;
                const d = c.choices && c.choices[0] && c.choices[0].delta;
                if (d && d.content) {
                    if (!tFirst) tFirst = performance.now();
                    pieces++;
                    reply += d.content;
                    out.innerHTML = renderMarkdown(reply); // escaped by renderMarkdown
                    const s = (performance.now() - tFirst) / 1000;
                    if (s > 0) $('speed').textContent = (pieces / s).toFixed(1) + ' tok/s';
                }
            }
        }
        if (usage && tFirst) {
            const s = (performance.now() - tFirst) / 1000;
            if (s > 0 && usage.completion_tokens > 1)
                $('speed').textContent = ((usage.completion_tokens - 1) / s).toFixed(1) + ' tok/s';
        }
        status('');
    } catch (e) {
        status(e.name === 'AbortError' ? 'stopped' : 'error: ' + e.message);
    } finally {
        if (reply) conversation.push({ role: 'assistant', content: reply });
        else conversation.pop();
        out.dataset.seconds = ((performance.now() - t0) / 1000).toFixed(2);
        controller = null;
        $('send').disabled = false;
        $('stop').disabled = true;
    }
}

window.addEventListener('DOMContentLoaded', () => {
    $('send').addEventListener('click', send);
    $('stop').addEventListener('click', () => controller && controller.abort());
    $('input').addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); send(); }
    });
    $('key').addEventListener('change', () => { localStorage.setItem('pooled-key', $('key').value); loadModel(); });
    loadModel();
});
