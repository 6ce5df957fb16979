/*
 * limit.h: `vram limit PID [SIZE|none] [--device N]` and `vram limit --group NAME [SIZE|none]`: a
 * running process's limit, or its group's budget, changed from outside through the ledger (limit.c).
 */
#ifndef VRAM_TOOLS_LIMIT_H
#define VRAM_TOOLS_LIMIT_H

/* argv[0] is "limit". Returns the exit status (0, 1 error, 2 usage error), or -1 for --help. */
int limit_main(int argc, char **argv);

#endif /* VRAM_TOOLS_LIMIT_H */
