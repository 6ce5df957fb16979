/*
 * header_man.c: writes the manual page libvram(3) (roff, man(7) macros) from include/vram.h, so that
 * the page says what the header says and cannot fall behind it. Run by the build:
 *   vram_header_man include/vram.h VERSION > libvram.3
 *
 * How the header is read (it is written this way; tests/man_test.sh checks that every VRAM_API
 * function and every status appears in the page):
 *   - its first comment: the NAME ("vram.h: WHAT") and the DESCRIPTION;
 *   - "/ * ---- title ---- * /" lines: a subsection each;
 *   - a comment that starts in column 0: text; lines that start with two or more spaces after " * "
 *     are a list ("  key:value   text", continued under the text: .TP items) or else kept as they are;
 *   - other lines: code, shown as they are without VRAM_API; the include guard, #include, the
 *     VRAM_API definition and extern "C" are left out;
 *   - an X-macro table ("#define NAME(X) \" and X(...) lines, each after its comment) is shown where a
 *     typedef expands it ("#define ITEM_(params) body", then "NAME(ITEM_)", "#undef ITEM_"): the typedef
 *     with one member per entry, then each member with the entry's comment (and its string arguments,
 *     a status's default message); entries without either share the description of the one before
 *     (a comment covers the entries up to the next comment).
 * Errors (an unreadable file, a table too large) go to stderr with exit status 1. One thread, no
 * locks; everything is freed at exit.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINES 4096
#define MAX_ENTRIES 128
#define MAX_ARGS 8
#define MAX_TABLES 8

typedef struct entry {
    char *args[MAX_ARGS];
    int nargs;
    char comment[2048];
} entry;

typedef struct table {
    char name[64];
    entry entries[MAX_ENTRIES];
    int n;
} table;

static table tables[MAX_TABLES];
static int ntables;
static char *lines[MAX_LINES];
static int nlines;

static void die(const char *what) {
    fprintf(stderr, "vram_header_man: %s\n", what);
    exit(1);
}

/* Text into roff: backslashes and minus signs escaped; a line that would start with '.' or '\''
 * guarded. */
static void roff(const char *s, size_t n, int line_start) {
    if (line_start && n > 0 && (*s == '.' || *s == '\'')) fputs("\\&", stdout);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\') fputs("\\e", stdout);
        else if (s[i] == '-') fputs("\\-", stdout);
        else putchar(s[i]);
    }
}

static void roff_line(const char *s) {
    roff(s, strlen(s), 1);
    putchar('\n');
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static const char *skip_space(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

/* ---- comments as text ----------------------------------------------------------------------- */

/* The text of one comment line: without "/ *", " * ", "* /". */
static void comment_text(const char *line, char *out, size_t len) {
    const char *s = line;
    if (starts(s, "/*")) s += 2;
    else if (starts(s, " *") && !starts(s, " */")) s += 2;
    else if (starts(s, " */")) s += 3;
    if (*s == ' ') s++;
    snprintf(out, len, "%s", s);
    char *end = strstr(out, "*/");
    if (end) *end = '\0';
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\n')) out[--n] = '\0';
}

/* A run of lines kept as they are ("  key:value   what it does", continued under the text): as a
 * .TP list when every line is a tag, two spaces or more, and its text, or a continuation indented to
 * the text's column (runs of spaces in the text become one); else as they are (.nf). */
static void print_pre(char pre[][1024], int n) {
    int col = -1, ok = 1;
    for (int k = 0; k < n && ok; k++) {
        const char *t = pre[k];
        int lead = (int)(skip_space(t) - t);
        const char *gap = strstr(t + lead, "  ");
        if (col >= 0 && lead >= col) continue;                    /* a continuation */
        if (!gap) { ok = 0; break; }
        int c = (int)(skip_space(gap) - t);
        if (col >= 0 && c != col) ok = 0;
        col = c;
    }
    if (!ok || col < 0) {
        fputs(".nf\n", stdout);
        for (int k = 0; k < n; k++) roff_line(pre[k]);
        fputs(".fi\n", stdout);
        return;
    }
    for (int k = 0; k < n; k++) {
        const char *t = pre[k];
        const char *text = t + col;
        if ((int)(skip_space(t) - t) < col) {                     /* a tag */
            const char *tag = skip_space(t);
            const char *gap = strstr(tag, "  ");
            fputs(".TP\n.B ", stdout);
            roff(tag, (size_t)(gap - tag), 0);
            fputs("\n", stdout);
        } else {
            text = skip_space(t);
        }
        char words[1024];
        size_t o = 0;
        for (const char *c = text; *c && o + 1 < sizeof words; c++)
            if (*c != ' ' || (o > 0 && words[o - 1] != ' ')) words[o++] = *c;
        words[o] = '\0';
        roff_line(words);
    }
}

/* Prints comment lines [from, to] as paragraphs; lines that start with two spaces or more as
 * print_pre shows them. */
static void print_comment(int from, int to) {
    static char pre[256][1024];
    int in_par = 0, npre = 0;
    for (int i = from; i <= to + 1; i++) {
        char t[1024] = "";
        if (i <= to) comment_text(lines[i], t, sizeof t);
        if (i <= to && starts(t, "  ") && npre < 256) {
            memcpy(pre[npre++], t, sizeof t);
            continue;
        }
        if (npre) {
            if (!in_par) fputs(".PP\n", stdout);
            print_pre(pre, npre);
            npre = 0;
            in_par = 0;          /* what follows a list starts a paragraph */
        }
        if (i > to) break;
        if (!*t) {
            in_par = 0;
            continue;
        }
        if (!in_par) fputs(".PP\n", stdout);
        in_par = 1;
        roff_line(t);
    }
}

/* ---- code ------------------------------------------------------------------------------------- */

static int in_code;

static void code_begin(void) {
    if (!in_code) fputs(".PP\n.RS 4\n.nf\n", stdout);
    in_code = 1;
}

static void code_end(void) {
    if (in_code) fputs(".fi\n.RE\n", stdout);
    in_code = 0;
}

/* A code line, without "VRAM_API "; the indented lines that continue a declaration (its parameters,
 * its comment) move left as far as it did. */
static void code_line(const char *s) {
    static int shift;
    code_begin();
    char *api;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    if (buf[0] != ' ') shift = 0;
    for (int k = 0; k < shift && buf[0] == ' ' && buf[1] == ' '; k++) memmove(buf, buf + 1, strlen(buf));
    while ((api = strstr(buf, "VRAM_API "))) {
        memmove(api, api + 9, strlen(api + 9) + 1);
        shift += 9;
    }
    roff_line(buf);
}

/* ---- X-macro tables ------------------------------------------------------------------------- */

/* The arguments of "X(a, b, "c, d")" into e (string literals kept whole, quotes included). */
static void parse_args(const char *s, entry *e) {
    s = strchr(s, '(');
    if (!s) return;
    s++;
    while (*s && *s != ')' && e->nargs < MAX_ARGS) {
        s = skip_space(s);
        const char *b = s;
        if (*s == '"') {
            for (s++; *s && *s != '"'; s++)
                if (*s == '\\' && s[1]) s++;
            if (*s) s++;
        } else {
            while (*s && *s != ',' && *s != ')') s++;
        }
        const char *end = s;
        while (end > b && end[-1] == ' ') end--;
        e->args[e->nargs] = strndup(b, (size_t)(end - b));
        if (!e->args[e->nargs]) die("out of memory");
        e->nargs++;
        if (*s == ',') s++;
    }
}

/* Reads "#define NAME(X) \" at line i and its continuation lines; returns the last line's index. */
static int read_table(int i) {
    if (ntables == MAX_TABLES) die("too many X-macro tables");
    table *t = &tables[ntables++];
    sscanf(lines[i] + 8, "%63[A-Za-z0-9_]", t->name);
    char comment[2048] = "";
    int in_comment = 0;
    while (i + 1 < nlines && strchr(lines[i], '\\')) {
        i++;
        char s[1024];
        snprintf(s, sizeof s, "%s", skip_space(lines[i]));
        char *bs = strrchr(s, '\\');
        if (bs) *bs = '\0';
        size_t n = strlen(s);
        while (n > 0 && s[n - 1] == ' ') s[--n] = '\0';
        const char *c = s;
        if (starts(c, "/*")) {
            in_comment = 1;
            comment[0] = '\0';
            c = skip_space(c + 2);
        }
        if (in_comment) {
            char part[1024];
            snprintf(part, sizeof part, "%s", c);
            char *end = strstr(part, "*/");
            if (end) {
                *end = '\0';
                in_comment = 0;
            }
            n = strlen(part);
            while (n > 0 && part[n - 1] == ' ') part[--n] = '\0';
            size_t have = strlen(comment);
            snprintf(comment + have, sizeof comment - have, "%s%s", have ? " " : "", skip_space(part));
            continue;
        }
        if (starts(c, "X(")) {
            if (t->n == MAX_ENTRIES) die("too many entries in an X-macro table");
            entry *e = &t->entries[t->n++];
            parse_args(c, e);
            snprintf(e->comment, sizeof e->comment, "%s", comment);
            comment[0] = '\0';
        }
    }
    return i;
}

static table *find_table(const char *name) {
    for (int i = 0; i < ntables; i++)
        if (strcmp(tables[i].name, name) == 0) return &tables[i];
    return NULL;
}

/* body with each parameter replaced by the entry's argument, "##" removed. */
static void expand(const char *body, char params[][64], int np, const entry *e, char *out, size_t len) {
    size_t o = 0;
    for (const char *s = body; *s && o + 1 < len;) {
        if (isalpha((unsigned char)*s) || *s == '_') {
            const char *b = s;
            while (isalnum((unsigned char)*s) || *s == '_') s++;
            size_t n = (size_t)(s - b);
            const char *rep = NULL;
            for (int p = 0; p < np; p++)
                if (strlen(params[p]) == n && strncmp(params[p], b, n) == 0 && p < e->nargs) rep = e->args[p];
            o += (size_t)snprintf(out + o, len - o, "%.*s", rep ? (int)strlen(rep) : (int)n, rep ? rep : b);
        } else if (s[0] == '#' && s[1] == '#') {
            s += 2;
            while (o > 0 && out[o - 1] == ' ') o--;
            s = skip_space(s);
        } else {
            out[o++] = *s++;
        }
        if (o >= len) o = len - 1;
    }
    out[o] = '\0';
}

/* The item macro of a typedef ("#define NAME_(p1, p2) body"), used by the next line "TABLE(NAME_)":
 * one member line per entry; after the typedef, the members with their comments. Returns the index
 * of the "#undef" line. */
static const table *pending;
static char pending_members[MAX_ENTRIES][512];

static int expand_typedef(int i) {
    char item[64], params[MAX_ARGS][64];
    int np = 0;
    const char *s = skip_space(lines[i]) + 8;
    sscanf(s, "%63[A-Za-z0-9_]", item);
    const char *p = strchr(s, '(');
    const char *close = p ? strchr(p, ')') : NULL;
    if (!close) die("an item macro without parameters");
    for (p++; p < close && np < MAX_ARGS;) {
        p = skip_space(p);
        sscanf(p, "%63[A-Za-z0-9_]", params[np++]);
        while (p < close && *p != ',') p++;
        if (*p == ',') p++;
    }
    const char *body = skip_space(close + 1);
    if (i + 1 >= nlines) die("an item macro at the end of the header");
    char tname[64] = "";
    sscanf(skip_space(lines[i + 1]), "%63[A-Za-z0-9_]", tname);
    const table *t = find_table(tname);
    if (!t) die("an item macro whose table is not defined before it");
    int indent = (int)(skip_space(lines[i + 1]) - lines[i + 1]);
    for (int k = 0; k < t->n; k++) {
        char member[512], line[600];
        expand(body, params, np, &t->entries[k], member, sizeof member);
        snprintf(pending_members[k], sizeof pending_members[k], "%s", member);
        snprintf(line, sizeof line, "%*s%s", indent, "", member);
        code_line(line);
    }
    pending = t;
    i += 2;
    while (i < nlines && !starts(skip_space(lines[i]), "#undef")) i++;
    return i;
}

/* Whether entry e has words of its own: a comment or a string argument. */
static int has_text(const entry *e) {
    if (e->comment[0]) return 1;
    for (int a = 0; a < e->nargs; a++)
        if (e->args[a][0] == '"') return 1;
    return 0;
}

/* A member's tag: "VRAM_OK = 0" of "VRAM_OK = 0,", "size_t current" of "size_t current;". */
static void print_tag(const char *macro, int k) {
    char tag[sizeof pending_members[k]];
    memcpy(tag, pending_members[k], sizeof tag);
    size_t n = strlen(tag);
    while (n > 0 && (tag[n - 1] == ',' || tag[n - 1] == ';' || tag[n - 1] == ' ')) tag[--n] = '\0';
    printf(".%s\n.B ", macro);
    roff(tag, n, 0);
    putchar('\n');
}

/* After the typedef: each member with its comment and string arguments; members without words of
 * their own join the one before (a comment in the header covers the entries up to the next one). */
static void print_pending(void) {
    if (!pending) return;
    code_end();
    for (int k = 0; k < pending->n;) {
        const entry *e = &pending->entries[k];
        print_tag("TP", k++);
        while (k < pending->n && !has_text(&pending->entries[k])) print_tag("TQ", k++);
        int any = 0;
        if (e->comment[0]) {
            roff(e->comment, strlen(e->comment), 1);
            any = 1;
        }
        for (int a = 0; a < e->nargs; a++) {
            if (e->args[a][0] != '"') continue;
            if (any) fputs(": ", stdout);
            roff(e->args[a], strlen(e->args[a]), !any);
            any = 1;
        }
        if (!any) fputs("\\&", stdout);
        putchar('\n');
    }
    pending = NULL;
}

/* ---- the page --------------------------------------------------------------------------------- */

static void read_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    char buf[4096];
    while (fgets(buf, sizeof buf, f)) {
        if (nlines == MAX_LINES) die("the header has too many lines");
        buf[strcspn(buf, "\n")] = '\0';
        if (!(lines[nlines++] = strdup(buf))) die("out of memory");
    }
    if (ferror(f)) die("cannot read the header");
    fclose(f);
}

/* The section title of "/ * ---- physical devices ---- * /": "Physical devices"; 0 when not one. */
static int section_title(const char *s, char *out, size_t len) {
    if (!starts(s, "/* ---- ")) return 0;
    s += 8;
    const char *e = strstr(s, " ----");
    if (!e) return 0;
    snprintf(out, len, "%.*s", (int)(e - s), s);
    out[0] = (char)toupper((unsigned char)out[0]);
    return 1;
}

static int skipped(const char *s) {
    static const char *const prefixes[] = { "#ifndef VRAM_H", "#define VRAM_H", "#include", "#ifdef __cplusplus",
                                             "extern \"C\"", "#endif" };
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (starts(s, prefixes[i])) return 1;
    return strcmp(s, "}") == 0;   /* the end of extern "C" */
}

/* Writes the part of the header that starts at line i (a blank line, a section title, a comment, a
 * table, a typedef's items or a code line); returns the last line it used. */
static int body_line(int i) {
    const char *s = lines[i];
    char title[256];
    if (!*skip_space(s)) {
        print_pending();
        code_end();
        return i;
    }
    if (section_title(s, title, sizeof title)) {
        print_pending();
        code_end();
        fputs(".SS \"", stdout);
        roff(title, strlen(title), 0);
        fputs("\"\n", stdout);
        return i;
    }
    if (starts(s, "/*")) {            /* a comment in column 0: text */
        print_pending();
        code_end();
        int end = i;
        while (end < nlines && !strstr(lines[end], "*/")) end++;
        if (end >= nlines) die("a comment that does not end");
        print_comment(i, end);
        return end;
    }
    if (starts(s, "#ifndef VRAM_API")) {   /* its definition: left out */
        int depth = 0;
        for (; i < nlines; i++) {
            if (starts(lines[i], "#if")) depth++;
            else if (starts(lines[i], "#endif") && --depth == 0) break;
        }
        return i;
    }
    if (skipped(s)) return i;
    if (starts(s, "#define ") && strstr(s, "(X)") && strchr(s, '\\')) {
        print_pending();
        code_end();
        return read_table(i);
    }
    if (starts(s, "#define ") && strchr(s, '(') && i + 1 < nlines) {
        char tname[64] = "";   /* an item macro whose next line names a table: a typedef's */
        sscanf(skip_space(lines[i + 1]), "%63[A-Za-z0-9_]", tname);
        if (find_table(tname)) return expand_typedef(i);
    }
    code_line(s);
    return i;
}

int main(int argc, char **argv) {
    if (argc != 3) die("usage: vram_header_man HEADER VERSION");
    read_lines(argv[1]);
    int i = 0;
    while (i < nlines && !starts(lines[i], "/*")) i++;
    int head_end = i;
    while (head_end < nlines && !strstr(lines[head_end], "*/")) head_end++;
    if (head_end >= nlines) die("no first comment");
    char name[512];
    comment_text(lines[i + 1], name, sizeof name);
    const char *what = strstr(name, ": ");
    if (!what) die("the first comment does not start with \"vram.h: WHAT\"");
    printf(".\\\" libvram(3), written by vram_header_man from include/vram.h: edit that, not this.\n"
           ".TH LIBVRAM 3 \"\" \"vram %s\" \"Library Functions Manual\"\n.nh\n.ad l\n.SH NAME\nlibvram \\- ",
           argv[2]);
    roff_line(what + 2);
    fputs(".SH SYNOPSIS\n.nf\n.B #include <vram.h>\n.fi\n.PP\nLink with\n.BR \\-lvram ,\n"
          "or \\fB$(pkg\\-config \\-\\-cflags \\-\\-libs vram)\\fR; CMake: \\fBfind_package(vram)\\fR and "
          "\\fBtarget_link_libraries(app PRIVATE vram::vram)\\fR.\n.SH DESCRIPTION\n", stdout);
    print_comment(i + 2, head_end);
    for (i = head_end + 1; i < nlines; i++) i = body_line(i);
    print_pending();
    code_end();
    fputs(".SH \"SEE ALSO\"\n.BR vram (1)\n", stdout);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
