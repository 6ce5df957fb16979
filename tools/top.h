/*
 * top.h: `vram top [--json] [--once]`: the processes of this machine that run under `vram run`, read
 * from the per-machine ledger (src/common/ledger.h).
 */
#ifndef VRAM_TOOLS_TOP_H
#define VRAM_TOOLS_TOP_H

/* argv[0] is "top". Returns the exit status (0, 1 error, 2 usage error), or -1 for --help. */
int top_main(int argc, char **argv);

#endif /* VRAM_TOOLS_TOP_H */
