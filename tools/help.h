/*
 * help.h: the text of `vram --help`, `vram help COMMAND`, `vram help trace` and the manual page
 * vram(1), as tables (help.c), and their two printers (help_print.c): plain text for the terminal,
 * roff (man(7)) for the manual page, which the build writes with `vram --man` (CMakeLists.txt), so
 * that the two cannot say different things.
 *
 * Invariants: every paragraph is one unwrapped line of plain text (the printers wrap and escape it);
 * every table ends with an entry whose name is NULL; a command's synopsis is made from its options
 * (help_item.syn), so an option is one line of its command's table. No state, no locks.
 */
#ifndef VRAM_TOOLS_HELP_H
#define VRAM_TOOLS_HELP_H

#include <stdio.h>

/* A list that is not in these tables (the replay policies of replay.c, the allocator options of the
 * library): item i's name and text (text NULL: the names are printed as one comma-separated list);
 * 0 past the last. */
typedef int (*help_list_fn)(int i, const char **name, const char **text);

/* An option, an environment variable, an exit status, a line of the trace format. */
typedef struct help_item {
    const char *name;     /* "--limit", "-o, --output", "VRAM_BACKEND", "3", "a" */
    const char *arg;      /* "SIZE", "cuda|sim" (after '=' for a variable), "ID BYTES ..."; NULL: none */
    const char *text;     /* one paragraph */
    const char *syn;      /* options: in the synopsis as this; NULL: "[NAME ARG]"; "": not there */
    help_list_fn list;    /* sub-items printed under the text; NULL: none */
} help_item;

typedef struct help_command {
    const char *name;               /* "replay"; NULL ends the table */
    const char *args;               /* before the options in the synopsis ("TRACE"); NULL: none */
    const char *args_after;         /* after them ("-- CMD [ARGS]"); NULL: none */
    const char *summary;            /* one line, for the short usage and the manual's list */
    const char *const *about;       /* paragraphs before the options; NULL-terminated */
    const help_item *options;
    const char *const *notes;       /* paragraphs after the options; NULL-terminated */
    const help_item *exit_status;   /* this command's statuses */
} help_command;

/* A group of variables (the library's, those of a program under vram run, other). */
typedef struct help_env_group {
    const char *title;              /* NULL ends the table */
    const help_item *vars;
} help_env_group;

/* A topic that is no command (`vram help trace`, the manual's TRACE FORMAT). */
typedef struct help_topic {
    const char *name, *title;
    const char *const *about;
    const help_item *items;
    const char *const *notes;
} help_topic;

extern const char *const help_name_line;       /* the manual's NAME: what vram is, one line */
extern const char *const help_description[];    /* the manual's: what vram is */
extern const char *const help_notes[];          /* paragraphs for both: sizes, JSON */
extern const help_command help_commands[];
extern const help_item help_general_options[];
extern const help_env_group help_environment[];
extern const help_item help_exit_status[];
extern const char *const help_exit_notes[];     /* paragraphs after the exit statuses */
extern const help_topic help_trace_topic;
extern const help_item help_files[];             /* the manual's FILES */

const help_command *help_find_command(const char *name);

/* The printers (help_print.c). */
void help_print_short(FILE *f);                              /* bare `vram`: the commands, one line each */
void help_print_all(FILE *f);                                /* vram --help */
void help_print_command(FILE *f, const help_command *c);     /* vram help COMMAND */
void help_print_topic(FILE *f, const help_topic *t);         /* vram help trace */
void help_print_man(FILE *f, const char *version);           /* vram --man: vram(1) in roff */

#endif /* VRAM_TOOLS_HELP_H */
