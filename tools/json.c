/*
 * json.c: JSON string literals from arbitrary bytes (see json.h). Valid UTF-8 is recognised by the
 * table of well-formed byte sequences (Unicode 3.9, table 3-7); everything else becomes U+FFFD, one
 * per maximal subpart, so that the output is always valid UTF-8 and the same text Python or a browser
 * would decode from the bytes. Control characters are escaped so that no raw one reaches a terminal
 * or a parser. json_utf8_sequence, the check, is also vram top's for its Prometheus label values.
 * No state, no locks.
 */
#include "json.h"

#include <stddef.h>

size_t json_utf8_sequence(const unsigned char *s, size_t *bad) {
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t more;
    if (c >= 0xc2 && c <= 0xdf) more = 1;
    else if (c == 0xe0) more = 2, lo = 0xa0;               /* no overlong 3-byte forms */
    else if (c == 0xed) more = 2, hi = 0x9f;               /* no surrogates */
    else if (c >= 0xe1 && c <= 0xef) more = 2;
    else if (c == 0xf0) more = 3, lo = 0x90;               /* no overlong 4-byte forms */
    else if (c == 0xf4) more = 3, hi = 0x8f;               /* nothing past U+10FFFF */
    else if (c >= 0xf1 && c <= 0xf3) more = 3;
    else { *bad = 1; return 0; }                           /* 80..C1, F5..FF: never a lead byte */
    for (size_t i = 1; i <= more; i++) {
        if (s[i] < lo || s[i] > hi) { *bad = i; return 0; }   /* a NUL stops here too */
        lo = 0x80, hi = 0xbf;
    }
    return more + 1;
}

static void write_string(FILE *f, const char *str, int html) {
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    fputc('"', f);
    while (*s) {
        unsigned char c = *s;
        if (c < 0x80) {
            if (c == '"' || c == '\\') fputc('\\', f), fputc(c, f);
            else if (c == '\n') fputs("\\n", f);
            else if (c == '\t') fputs("\\t", f);
            else if (c == '\r') fputs("\\r", f);
            else if (c == '\b') fputs("\\b", f);
            else if (c == '\f') fputs("\\f", f);
            else if (c < 0x20 || c == 0x7f || (html && (c == '<' || c == '>' || c == '&'))) fprintf(f, "\\u%04x", c);
            else fputc(c, f);
            s++;
            continue;
        }
        size_t bad = 0, n = json_utf8_sequence(s, &bad);
        if (n == 0) {
            fputs("\\ufffd", f);
            s += bad;
        } else {
            if (n == 2 && c == 0xc2 && s[1] < 0xa0) fprintf(f, "\\u%04x", s[1]);   /* C1 controls, U+0080..U+009F */
            else fwrite(s, 1, n, f);
            s += n;
        }
    }
    fputc('"', f);
}

void json_string(FILE *f, const char *s) { write_string(f, s, 0); }

void json_string_html(FILE *f, const char *s) { write_string(f, s, 1); }
