# serve_test.sh - `pooled serve` on 127.0.0.1 with a free port: the OpenAI and Anthropic
# client libraries (tests/serve/api.mjs) against what `pooled run` answers for the same
# rendered prompt, then raw HTTP for what a client library never sends (malformed JSON, an
# oversized body, a wrong method), and a clean stop on SIGTERM; --spec lookup's text is
# pooled run's.
. tests/e2e/lib.sh
. tests/e2e/serve_lib.sh
M=$SHARED/fixtures/hf/qwen3/qwen3-q8_0.gguf
S=$SHARED/models/stories260K.gguf
KEY=k3y-$$

check_err "a bad --port" "$POOLED" serve -m "$S" --port 70000
check_err "a host that does not resolve" "$POOLED" serve -m "$S" --host no.such.host.invalid --port 0

# what `pooled run` answers for the rendered conversation, and its token counts
printf '%s' '[{"role": "system", "content": "You are a helpful assistant."},
              {"role": "user", "content": "Write a short story about a fox."}]' >"$TMP/messages.json"
MAX=24
ids=$("$POOLED" template -m "$M" --messages "$TMP/messages.json" --ids)
"$POOLED" run -m "$M" --prompt-ids "$ids" --temp 0 -n $MAX 2>/dev/null >"$TMP/expect"
gen=$("$POOLED" run -m "$M" --prompt-ids "$ids" --temp 0 -n $MAX --ids 2>/dev/null)
"$POOLED" run -m "$S" -p "Once upon a time" --temp 0 -n 40 2>/dev/null >"$TMP/story"
# tools: a model whose template renders them (Qwen3's), and the ids of a conversation with a
# tool call and its result as `pooled template` renders it (Hugging Face's message shapes)
R=$SHARED/fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf
printf '%s' '[{"role": "user", "content": "Weather in Paris?"},
  {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
  {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}]' >"$TMP/tool_msgs.json"
printf '%s' '[{"type": "function", "function": {"name": "get_weather", "description": "Weather
  for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
  "required": ["city"]}}}]' | tr -d '\n' >"$TMP/tools.json"
tool_ids=$("$POOLED" template -m "$R" --messages "$TMP/tool_msgs.json" --tools "$TMP/tools.json" --ids)

if start chat -m "$M" --api-key "$KEY" --queue 0; then
    CHAT_URL=$URL CHAT_PID=$PID
    if start story -m "$S"; then
        STORY_URL=$URL STORY_PID=$PID
        start tools -m "$R" --ctx 1024 && TOOLS_URL=$URL TOOLS_PID=$PID
        node_checks tests/serve/api.mjs CHAT_URL="$CHAT_URL" STORY_URL="$STORY_URL" KEY="$KEY" \
            MESSAGES="$TMP/messages.json" EXPECT="$TMP/expect" STORY_EXPECT="$TMP/story" \
            N_PROMPT="$(wc -w <<<"$ids")" N_GEN="$(wc -w <<<"$gen")" MAX_TOKENS=$MAX \
            TOOLS_URL="${TOOLS_URL:-}" TOOLS="$TMP/tools.json" TOOL_N_PROMPT="$(wc -w <<<"$tool_ids")"
        check "the aborted stream was cancelled" grep -q "cancelled" "$TMP/chat.err"
        if [ -n "${TOOLS_PID:-}" ]; then
            # the client turns thinking off: the prompt is the template's with
            # enable_thinking false (`pooled template --no-think`), in each API's words
            printf '%s' '[{"role": "user", "content": "Weather in Paris?"}]' >"$TMP/think.json"
            on=$("$POOLED" template -m "$R" --messages "$TMP/think.json" --ids | wc -w)
            off=$("$POOLED" template -m "$R" --messages "$TMP/think.json" --no-think --ids | wc -w)
            check "--no-think renders more ids ($on, $off)" [ "$off" -gt "$on" ]
            ask() { curl -s "$TOOLS_URL$1" -H 'Content-Type: application/json' -d "$2"; }
            M1='"messages": [{"role": "user", "content": "Weather in Paris?"}]'
            n=$(ask /v1/chat/completions "{$M1, \"max_tokens\": 1}" | jq .usage.prompt_tokens)
            check "chat, thinking left on: $n ids" [ "$n" = "$on" ]
            n=$(ask /v1/chat/completions "{$M1, \"max_tokens\": 1, \"chat_template_kwargs\": {\"enable_thinking\": false}}" | jq .usage.prompt_tokens)
            check "chat, chat_template_kwargs.enable_thinking false: $n ids" [ "$n" = "$off" ]
            n=$(ask /v1/chat/completions "{$M1, \"max_tokens\": 1, \"reasoning_effort\": \"none\"}" | jq .usage.prompt_tokens)
            check "chat, reasoning_effort none: $n ids" [ "$n" = "$off" ]
            n=$(ask /v1/messages/count_tokens "{$M1, \"thinking\": {\"type\": \"disabled\"}}" | jq .input_tokens)
            check "count_tokens, thinking disabled: $n ids" [ "$n" = "$off" ]
            n=$(ask /v1/responses "{\"input\": \"Weather in Paris?\", \"max_output_tokens\": 1, \"reasoning\": {\"effort\": \"minimal\"}}" | jq .usage.input_tokens)
            check "responses, reasoning.effort minimal: $n ids" [ "$n" = "$off" ]
            kill -TERM $TOOLS_PID && wait $TOOLS_PID
        fi
        # the chat page on a server whose replies cannot end before the page's stop: this tiny
        # random model samples its end-of-turn id at any time (1 reply in 5 ended within 300
        # ids), and a reply filling 2048 ids of context ends in seconds
        if start page -m "$M" --api-key "$KEY" --ignore-eos --ctx 65536; then
            # --ignore-eos: a greedy reply that ends early without it runs to max_tokens, the
            # text of `pooled run --ignore-eos`
            printf '%s' '[{"role": "user", "content": "Write a long story."}]' >"$TMP/page.json"
            page_ids=$("$POOLED" template -m "$M" --messages "$TMP/page.json" --ids)
            n_eog=$("$POOLED" run -m "$M" --prompt-ids "$page_ids" --temp 0 -n 300 --ids 2>/dev/null | wc -w)
            check "greedy, the model ends its turn before 300 ids (got $n_eog)" [ "$n_eog" -lt 300 ]
            "$POOLED" run -m "$M" --prompt-ids "$page_ids" --temp 0 -n 300 --ignore-eos 2>/dev/null >"$TMP/page.expect"
            curl -s -H "Authorization: Bearer $KEY" "$URL/v1/chat/completions" -d '{"messages":
                [{"role": "user", "content": "Write a long story."}], "temperature": 0,
                "max_tokens": 300}' >"$TMP/page.reply"
            check "--ignore-eos: 300 ids, finish_reason length" jq -e >/dev/null \
                '.usage.completion_tokens == 300 and .choices[0].finish_reason == "length"' "$TMP/page.reply"
            check "--ignore-eos: the text of pooled run --ignore-eos" cmp -s "$TMP/page.expect" \
                <(jq -j '.choices[0].message.content' "$TMP/page.reply")
            node_checks tests/serve/browser_test.mjs CHAT_URL="$URL" KEY="$KEY" LOG="$TMP/page.err"
            kill -TERM $PID && wait $PID
        fi

        # raw HTTP: each answer's status and its API's error shape
        # post PATH BODY-FILE [curl args]: prints the status, the body to $TMP/body
        post() {
            local p=$1 f=$2; shift 2
            curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
                --data-binary "@$f" "$@" "$STORY_URL$p"
        }
        printf '{"messages": [' >"$TMP/bad.json"
        check "malformed JSON: 400" [ "$(post /v1/chat/completions "$TMP/bad.json")" = 400 ]
        check "malformed JSON: OpenAI's error object" jq -e >/dev/null '.error.type == "invalid_request_error"' "$TMP/body"
        check "malformed JSON (messages): 400" [ "$(post /v1/messages "$TMP/bad.json")" = 400 ]
        check "malformed JSON (messages): Anthropic's error object" jq -e >/dev/null '.type == "error" and .error.type == "invalid_request_error"' "$TMP/body"
        printf '{"prompt": 7}' >"$TMP/type.json"
        check "a wrong type: 400" [ "$(post /v1/completions "$TMP/type.json")" = 400 ]
        head -c $((8 * 1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$TMP/big.json"
        check "a body over 8 MiB: 413" [ "$(post /v1/completions "$TMP/big.json")" = 413 ]
        check "a body over 8 MiB: the limit named" jq -e >/dev/null '.error.message | test("8 MiB")' "$TMP/body"
        check "a body over 8 MiB, chunked: 413" [ "$(post /v1/completions "$TMP/big.json" -H 'Transfer-Encoding: chunked')" = 413 ]
        check "wrong method: 405" [ "$(curl -s -o "$TMP/body" -w '%{http_code}' "$STORY_URL/v1/chat/completions")" = 405 ]
        check "unknown route: 404" [ "$(curl -s -o "$TMP/body" -w '%{http_code}' "$STORY_URL/nope")" = 404 ]
        printf '{"content": "Once upon a time"}' >"$TMP/tok.json"
        check "tokenize: 200" [ "$(post /tokenize "$TMP/tok.json")" = 200 ]
        want=$("$POOLED" tokenize -m "$S" --no-bos "Once upon a time")
        check "tokenize: the ids of pooled tokenize" [ "$(jq -r '.tokens | map(tostring) | join(" ")' "$TMP/body")" = "$want" ]
        jq -c '{tokens: .tokens}' "$TMP/body" >"$TMP/detok.json"
        check "detokenize: 200" [ "$(post /detokenize "$TMP/detok.json")" = 200 ]
        check "detokenize: the text back" jq -e >/dev/null '.content | test("Once upon a time")' "$TMP/body"
        printf '{"tokens": [99999999]}' >"$TMP/detok.json"
        check "detokenize: an id outside the vocabulary: 400" [ "$(post /detokenize "$TMP/detok.json")" = 400 ]
        # the chat page: served without a key, HTML with a strict CSP; its script and style
        # are the files under serve/page/ (serve/page.c is current)
        check "page: 200" [ "$(curl -s -D "$TMP/page.h" -o "$TMP/page.html" -w '%{http_code}' "$STORY_URL/")" = 200 ]
        check "page: text/html" grep -qi '^content-type: text/html; charset=utf-8' "$TMP/page.h"
        csp=$(sed -n 's/^[Cc]ontent-[Ss]ecurity-[Pp]olicy: //p' "$TMP/page.h" | tr -d '\r')
        check "page: a strict Content-Security-Policy ($csp)" bash -c '[[ "$1" == *"default-src '"'none'"'"* &&
            "$1" == *"script-src '"'self'"'"* && "$1" != *unsafe* && "$1" != *"*"* ]]' _ "$csp"
        check "page: the HTML of serve/page/index.html" cmp -s "$TMP/page.html" serve/page/index.html
        check "page: no inline script or style (the CSP allows none)" bash -c \
            "! grep -Eqi '<script>|<style|[[:space:]]on[a-z]+=' '$TMP/page.html'"
        curl -s -D "$TMP/js.h" "$STORY_URL/chat.js" >"$TMP/chat.js"
        check "page: chat.js is markdown.js and chat.js" cmp -s "$TMP/chat.js" <(cat serve/page/markdown.js serve/page/chat.js)
        check "page: chat.js as text/javascript" grep -qi '^content-type: text/javascript' "$TMP/js.h"
        curl -s -D "$TMP/css.h" "$STORY_URL/chat.css" >"$TMP/chat.css"
        check "page: chat.css" cmp -s "$TMP/chat.css" serve/page/chat.css
        check "page: chat.css as text/css" grep -qi '^content-type: text/css' "$TMP/css.h"
        node_checks tests/serve/page_test.mjs
        check "models: the file's name" [ "$(curl -s "$STORY_URL/v1/models" | jq -r '.data[0].id')" = stories260K.gguf ]

        kill -TERM $STORY_PID; wait $STORY_PID; rc=$?
        check "SIGTERM: exit 0 (got $rc)" [ $rc = 0 ]
    fi
    curl -sN -H "x-api-key: $KEY" "$CHAT_URL/v1/messages" -d '{"messages": [{"role": "user",
        "content": "hi"}], "max_tokens": 3, "stream": true}' | sed -n 's/^event: //p' | uniq |
        paste -sd, >"$TMP/events"
    check "messages stream: Anthropic's event order, ping included" [ "$(cat "$TMP/events")" = \
        message_start,content_block_start,ping,content_block_delta,content_block_stop,message_delta,message_stop ]
    # SIGINT in the middle of a stream: the stream ends properly, the server exits 0
    curl -sN -H "Authorization: Bearer $KEY" "$CHAT_URL/v1/chat/completions" \
        -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1900, "stream": true}' \
        >"$TMP/sigint.sse" &
    CURL=$!
    for _ in $(seq 100); do [ -s "$TMP/sigint.sse" ] && break; sleep 0.05; done
    kill -INT $CHAT_PID; wait $CHAT_PID; rc=$?
    wait $CURL
    check "SIGINT while streaming: exit 0 (got $rc)" [ $rc = 0 ]
    check "SIGINT while streaming: the stream ended with [DONE]" grep -q '^data: \[DONE\]' "$TMP/sigint.sse"
    check "no sanitizer report" bash -c "! grep -q Sanitizer '$TMP'/*.err"
fi

# --spec lookup (2 slots): the drafts checked in one pass each, the greedy text pooled run's;
# and who may call from a browser: another site's page is refused, a DNS name pointed at
# this loopback server too, the server's own page and an allowed origin (with CORS) are not
if start spec -m "$S" --spec lookup --parallel 2 --allow-origin http://app.example; then
    code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
    check "another site's page: 403" [ "$(code -H 'Origin: http://evil.example' "$URL/v1/models")" = 403 ]
    curl -s -H 'Origin: http://evil.example' "$URL/v1/completions" -d '{"prompt": "x"}' >"$TMP/evil.json"
    check "... in the API's error shape" jq -e '.error.message | test("other origins")' "$TMP/evil.json"
    check "a rebinding Host: 403" [ "$(code -H 'Host: evil.example' "$URL/health")" = 403 ]
    check "the server's own page: 200" [ "$(code -H "Origin: $URL" "$URL/v1/models")" = 200 ]
    curl -s -D "$TMP/pre.h" -o /dev/null -X OPTIONS -H 'Origin: http://app.example' \
        -H 'Access-Control-Request-Method: POST' \
        -H 'Access-Control-Request-Headers: content-type, x-stainless-os' "$URL/v1/completions"
    check "an allowed origin's preflight: 204 with its headers" bash -c \
        "grep -q '^HTTP/1.1 204' '$TMP/pre.h' && grep -qi '^Access-Control-Allow-Origin: http://app.example' '$TMP/pre.h' && grep -qi '^Access-Control-Allow-Headers: content-type, x-stainless-os' '$TMP/pre.h'"
    curl -s -D "$TMP/cors.h" -o /dev/null -H 'Origin: http://app.example' "$URL/v1/models"
    check "an allowed origin's answer names it" grep -qi '^Access-Control-Allow-Origin: http://app.example' "$TMP/cors.h"
    curl -s "$URL/v1/completions" -H 'Content-Type: application/json' \
        -d '{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}' |
        jq -r '.choices[0].text' | head -c -1 >"$TMP/spec.txt"
    check "--spec lookup: the text of pooled run" cmp -s "$TMP/spec.txt" "$TMP/story"
    kill -TERM $PID && wait $PID
    check "--spec lookup: drafts were checked ($(grep completion "$TMP/spec.err"))" \
        grep -Eq "generated, [0-9]+ of [1-9][0-9]* drafts accepted" "$TMP/spec.err"
fi
finish
