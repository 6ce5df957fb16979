/*
 * json.h: the one JSON string writer of the vram tool: every --json output (vram ls, replay, top)
 * and vram report's page write their strings through it, and so do bench/'s placement, warm_pair and
 * plan_detect (built with the tests); its UTF-8 check keeps vram top's Prometheus label values valid
 * too. No state, no locks.
 */
#ifndef VRAM_TOOLS_JSON_H
#define VRAM_TOOLS_JSON_H

#include <stddef.h>
#include <stdio.h>

/* The length (2..4) of the well-formed UTF-8 sequence at s, whose lead byte s[0] is not ASCII, or 0
 * with *bad set to the length of its maximal ill-formed subpart (1..3): Unicode 3.9, table 3-7.
 * Reads no byte past a NUL. */
size_t json_utf8_sequence(const unsigned char *s, size_t *bad);

/* Writes `s` (NULL: "") as a JSON string literal, quoted and escaped, in ASCII and valid UTF-8 as
 * RFC 8259 requires whatever the bytes were (file names, command names, frames and messages are
 * bytes, not text): '"' and '\\' escaped; control characters (C0, DEL, C1) as \n, \t, \r, \b, \f or
 * \u00XX; well-formed UTF-8 copied as it is; each maximal ill-formed subsequence (a Latin-1 byte, a
 * truncated sequence, an overlong form, a surrogate, a code point past U+10FFFF: Unicode 3.9, as
 * Python's errors="replace" and browsers decode) replaced by one \ufffd. */
void json_string(FILE *f, const char *s);

/* json_string, also with '<', '>' and '&' as \u00XX: safe inside an HTML <script> element. */
void json_string_html(FILE *f, const char *s);

#endif /* VRAM_TOOLS_JSON_H */
