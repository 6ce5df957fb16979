/*
 * help_print.c: prints the tables of help.c as the terminal's help (plain text wrapped at
 * HELP_WIDTH columns) and as the manual page vram(1) (roff with man(7) macros; the build writes
 * vram.1 from `vram --man`).
 *
 * Invariants: both printers walk the same tables in the same order and leave nothing out, so the help
 * and the manual name the same commands, options, variables and exit statuses (tests/man_test.sh
 * checks it). Text printed into roff goes through roff_text, which escapes what roff would read as
 * requests or escapes. No state, no locks.
 */
#include <stdio.h>
#include <string.h>

#include "help.h"

#define HELP_WIDTH 100

/* ---- plain text ------------------------------------------------------------------------------- */

/* One word of `len` bytes at *col: on this line after a space, or (past HELP_WIDTH) on a new line at
 * column `indent`. *col == -1: the first word of a paragraph, at the current column (*fresh). */
static void text_word(FILE *f, const char *w, int len, int *col, int indent, int *fresh) {
    if (*fresh) {
        *fresh = 0;
    } else if (*col + 1 + len > HELP_WIDTH) {
        *col = fprintf(f, "\n%*s", indent, "") - 1;
    } else {
        fputc(' ', f);
        (*col)++;
    }
    fwrite(w, 1, (size_t)len, f);
    *col += len;
}

/* `text` wrapped: it starts at column *col (where the cursor is), continues at `indent`. */
static void text_wrap(FILE *f, const char *text, int *col, int indent, int *fresh) {
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        const char *e = p;
        while (*e && *e != ' ') e++;
        if (e > p) text_word(f, p, (int)(e - p), col, indent, fresh);
        p = e;
    }
}

static void text_paragraph(FILE *f, const char *text, int indent) {
    int col = fprintf(f, "%*s", indent, ""), fresh = 1;
    text_wrap(f, text, &col, indent, &fresh);
    fputc('\n', f);
}

static void text_paragraphs(FILE *f, const char *const *p, int indent) {
    for (; p && *p; p++) text_paragraph(f, *p, indent);
}

/* "NAME ARG" (sep ' ') or "NAME=ARG" (sep '='). */
static int item_label(char *buf, size_t len, const help_item *it, char sep) {
    return it->arg ? snprintf(buf, len, "%s%c%s", it->name, sep, it->arg) : snprintf(buf, len, "%s", it->name);
}

/* A table of items at `indent`: labels in a column at most `cap` wide, texts after it (a longer label
 * pushes its text two spaces further on the same line), then each item's list: names alone continue
 * the text as a comma-separated list, names with texts are a table under the item. */
static void text_items(FILE *f, const help_item *items, int indent, char sep, int cap) {
    char label[256];
    int w = 0;
    for (const help_item *it = items; it->name; it++) {
        int n = item_label(label, sizeof label, it, sep);
        if (n > w) w = n;
    }
    if (w > cap) w = cap;
    int at = indent + w + 2;
    for (const help_item *it = items; it->name; it++) {
        int n = item_label(label, sizeof label, it, sep);
        int col = fprintf(f, "%*s%s", indent, "", label), fresh = 1;
        col += fprintf(f, "%*s", n <= w ? at - col : 2, "");
        text_wrap(f, it->text, &col, at, &fresh);
        const char *name, *text;
        if (it->list && it->list(0, &name, &text) && !text) {       /* names only: a list after the text */
            for (int i = 0; it->list(i, &name, &text); i++) {
                char word[160];
                snprintf(word, sizeof word, "%s", name);   /* (the next call may reuse name's buffer) */
                int len = (int)strlen(word);
                if (it->list(i + 1, &name, &text) && len + 1 < (int)sizeof word) word[len++] = ',';
                text_word(f, word, len, &col, at, &fresh);
            }
        }
        fputc('\n', f);
        if (it->list && it->list(0, &name, &text) && text) {        /* name and text: a table under it */
            int nw = 0;
            for (int i = 0; it->list(i, &name, &text); i++)
                if ((int)strlen(name) > nw) nw = (int)strlen(name);
            for (int i = 0; it->list(i, &name, &text); i++) {
                int c = fprintf(f, "%*s%-*s  ", indent + 2, "", nw, name), fr = 1;
                text_wrap(f, text, &c, indent + 4 + nw, &fr);
                fputc('\n', f);
            }
        }
    }
}

/* "replay TRACE [--policy NAME | --growth] ...": the command's synopsis, from its options. */
static int synopsis(char *buf, size_t len, const help_command *c) {
    size_t n = 0;
#define SYN_ADD(...) do { int k_ = snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__); \
                          if (k_ > 0) n += (size_t)k_; } while (0)
    SYN_ADD("%s", c->name);
    if (c->args) SYN_ADD(" %s", c->args);
    for (const help_item *o = c->options; o && o->name; o++) {
        if (o->syn && !*o->syn) continue;
        if (o->syn) SYN_ADD(" %s", o->syn);
        else if (o->arg) SYN_ADD(" [%s %s]", o->name, o->arg);
        else SYN_ADD(" [%s]", o->name);
    }
    if (c->args_after) SYN_ADD(" %s", c->args_after);
#undef SYN_ADD
    return n < len ? 0 : -1;
}

/* The synopsis wrapped after `lead`; continuation lines under the first argument. */
static void text_synopsis(FILE *f, const char *lead, const help_command *c) {
    char syn[1024];
    synopsis(syn, sizeof syn, c);
    int col = fprintf(f, "%s", lead), fresh = 1;
    text_wrap(f, syn, &col, col + (int)strlen(c->name) + 1, &fresh);
    fputc('\n', f);
}

/* "Exit status: 0: the replay ran ...; 3: ...; 2: usage error." */
static void text_exit_line(FILE *f, const help_item *items, int indent) {
    char line[2048];
    size_t n = (size_t)snprintf(line, sizeof line, "Exit status:");
    for (const help_item *it = items; it->name && n < sizeof line; it++)
        n += (size_t)snprintf(line + n, sizeof line - n, " %s: %s%s", it->name, it->text, it[1].name ? ";" : ".");
    text_paragraph(f, line, indent);
}

static void text_command_body(FILE *f, const help_command *c) {
    text_paragraphs(f, c->about, 6);
    if (c->options && c->options->name) text_items(f, c->options, 6, ' ', 16);
    text_paragraphs(f, c->notes, 6);
    text_exit_line(f, c->exit_status ? c->exit_status : help_exit_status, 6);
}

void help_print_short(FILE *f) {
    fputs("Usage: vram <command> [options]\n\nCommands:\n", f);
    for (const help_command *c = help_commands; c->name; c++) fprintf(f, "  %-8s %s\n", c->name, c->summary);
    fputs("\n'vram help COMMAND' or 'vram COMMAND --help' shows one command; 'vram --help' everything.\n", f);
}

void help_print_command(FILE *f, const help_command *c) {
    text_synopsis(f, "Usage: vram ", c);
    text_command_body(f, c);
    fputs("'vram --help' shows every command and the environment; 'man vram' the same.\n", f);
}

void help_print_topic(FILE *f, const help_topic *t) {
    fprintf(f, "%s:\n", t->title);
    text_paragraphs(f, t->about, 2);
    text_items(f, t->items, 4, ' ', 30);
    text_paragraphs(f, t->notes, 2);
}

void help_print_all(FILE *f) {
    fputs("Usage: vram <command> [options]\n"
          "       vram help [COMMAND | trace] | --help | --version\n\nCommands:\n", f);
    for (const help_command *c = help_commands; c->name; c++) {
        text_synopsis(f, "  ", c);
        text_command_body(f, c);
        fputc('\n', f);
    }
    fputs("Options:\n", f);
    text_items(f, help_general_options, 2, ' ', 16);
    for (const help_env_group *g = help_environment; g->title; g++) {
        fprintf(f, "\n%s:\n", g->title);
        text_items(f, g->vars, 2, '=', 31);
    }
    fputs("\nFiles:\n", f);
    text_items(f, help_files, 2, ' ', 20);
    fputs("\nExit status:\n", f);
    text_items(f, help_exit_status, 2, ' ', 4);
    text_paragraphs(f, help_exit_notes, 2);
    fputc('\n', f);
    text_paragraphs(f, help_notes, 0);
    fputs("'vram help trace' describes the trace format.\n", f);
}

/* ---- roff ------------------------------------------------------------------------------------- */

/* Text into roff: backslashes and minus signs escaped, a line that would start with '.' or '\''
 * (a request) guarded with \&. */
static void roff_text(FILE *f, const char *s) {
    if (*s == '.' || *s == '\'') fputs("\\&", f);
    for (; *s; s++) {
        if (*s == '\\') fputs("\\e", f);
        else if (*s == '-') fputs("\\-", f);
        else fputc(*s, f);
    }
}

static void roff_paragraphs(FILE *f, const char *const *p) {
    for (; p && *p; p++) {
        fputs(".PP\n", f);
        roff_text(f, *p);
        fputc('\n', f);
    }
}

/* A font for each word of a synopsis or label: options (from '-') bold, upper-case words
 * (placeholders) italic, lower-case words bold when literal_lower; brackets and bars as they are.
 * Spaces within brackets do not break the line ("[--limit SIZE]" stays whole). */
static void roff_words(FILE *f, const char *s, int literal_lower) {
    int depth = 0;
    while (*s) {
        if (strchr(" []|,=", *s)) {
            depth += *s == '[' ? 1 : *s == ']' && depth > 0 ? -1 : 0;
            if (*s == ' ' && depth > 0) fputs("\\ ", f);
            else fputc(*s, f);
            s++;
            continue;
        }
        const char *e = s;
        while (*e && !strchr(" []|,=", *e)) e++;
        char w[256];
        snprintf(w, sizeof w, "%.*s", (int)(e - s), s);
        int upper = (w[0] >= 'A' && w[0] <= 'Z') || w[0] == '<';
        const char *font = w[0] == '-' ? "B" : upper ? "I" : literal_lower ? "B" : NULL;
        if (font) fprintf(f, "\\f%s", font);
        roff_text(f, w);
        if (font) fputs("\\fR", f);
        s = e;
    }
}

/* .TP items; variables' names bold and their values italic after '='. */
static void roff_items(FILE *f, const help_item *items, char sep) {
    for (const help_item *it = items; it->name; it++) {
        fputs(".TP\n", f);
        if (sep == '=') {
            fputs("\\fB", f);
            roff_text(f, it->name);
            fputs("\\fR", f);
            if (it->arg) {
                fputc('=', f);
                fputs("\\fI", f);
                roff_text(f, it->arg);
                fputs("\\fR", f);
            }
        } else {
            roff_words(f, it->name, 1);
            if (it->arg) {
                fputc(' ', f);
                roff_words(f, it->arg, 0);
            }
        }
        fputc('\n', f);
        roff_text(f, it->text);
        const char *name, *text;
        if (it->list && it->list(0, &name, &text) && !text) {
            for (int i = 0; it->list(i, &name, &text); i++) {
                fputc(' ', f);
                roff_text(f, name);
                if (it->list(i + 1, &name, &text)) fputc(',', f);
            }
        }
        fputc('\n', f);
        if (it->list && it->list(0, &name, &text) && text) {
            fputs(".RS\n", f);
            for (int i = 0; it->list(i, &name, &text); i++) {
                fputs(".TP\n\\fB", f);
                roff_text(f, name);
                fputs("\\fR\n", f);
                roff_text(f, text);
                fputc('\n', f);
            }
            fputs(".RE\n", f);
        }
    }
}

static void roff_synopsis(FILE *f, const help_command *c) {
    char syn[1024];
    synopsis(syn, sizeof syn, c);
    fputs("\\fBvram\\fR ", f);
    roff_words(f, syn, 1);
    fputc('\n', f);
}

void help_print_man(FILE *f, const char *version) {
    fputs(".\\\" vram(1), written by `vram --man` from tools/help.c: edit that, not this.\n", f);
    fprintf(f, ".TH VRAM 1 \"\" \"vram %s\" \"User Commands\"\n", version);
    fputs(".nh\n.ad l\n", f);   /* no hyphenation (names and options stay whole), ragged right */
    fputs(".SH NAME\nvram \\- ", f);
    roff_text(f, help_name_line);
    fputs("\n.SH SYNOPSIS\n", f);
    for (const help_command *c = help_commands; c->name; c++) {
        roff_synopsis(f, c);
        fputs(".br\n", f);
    }
    fputs("\\fBvram help\\fR [\\fICOMMAND\\fR | \\fBtrace\\fR]\n.br\n"
          "\\fBvram\\fR \\fB\\-\\-help\\fR | \\fB\\-\\-version\\fR | \\fB\\-\\-man\\fR\n", f);
    fputs(".SH DESCRIPTION\n", f);
    roff_paragraphs(f, help_description);
    roff_paragraphs(f, help_notes);
    fputs(".SH COMMANDS\n", f);
    for (const help_command *c = help_commands; c->name; c++) {
        fprintf(f, ".SS %s\n", c->name);
        roff_synopsis(f, c);
        roff_paragraphs(f, c->about);
        if (c->options && c->options->name) roff_items(f, c->options, ' ');
        roff_paragraphs(f, c->notes);
        fputs(".PP\nExit status:\n.RS\n.PD 0\n", f);
        roff_items(f, c->exit_status ? c->exit_status : help_exit_status, ' ');
        fputs(".PD\n.RE\n", f);
    }
    fputs(".SH OPTIONS\n", f);
    roff_items(f, help_general_options, ' ');
    fputs(".SH ENVIRONMENT\n", f);
    for (const help_env_group *g = help_environment; g->title; g++) {
        fputs(".SS \"", f);
        roff_text(f, g->title);
        fputs("\"\n", f);
        roff_items(f, g->vars, '=');
    }
    fputs(".SH \"EXIT STATUS\"\n", f);
    roff_items(f, help_exit_status, ' ');
    roff_paragraphs(f, help_exit_notes);
    fputs(".SH \"TRACE FORMAT\"\n", f);
    roff_paragraphs(f, help_trace_topic.about);
    roff_items(f, help_trace_topic.items, ' ');
    roff_paragraphs(f, help_trace_topic.notes);
    fputs(".SH FILES\n", f);
    roff_items(f, help_files, ' ');
    fputs(".SH \"SEE ALSO\"\n.BR libvram (3)\n", f);
}
