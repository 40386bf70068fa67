/* page.h - the chat page served at / (serve/page/, embedded by tools/embed_page.sh into
 * serve/page.c): the HTML, its style sheet (/chat.css) and its script (/chat.js:
 * markdown.js then chat.js). NUL-terminated text. */
#ifndef PL_SERVE_PAGE_H
#define PL_SERVE_PAGE_H

extern const char srv_page_html[];
extern const char srv_page_css[];
extern const char srv_page_js[];

#endif
