/*
 * run.h: `vram run`: runs an unmodified program with libvram_preload.so (LD_PRELOAD) and the
 * VRAM_* variables that set its visible devices, growth, limits and logging.
 */
#ifndef VRAM_TOOLS_RUN_H
#define VRAM_TOOLS_RUN_H

/* argv[0] is "run". Replaces the process with the command on success; otherwise returns the exit
 * status (1 error, 2 usage error, 126/127 the command could not be run), or -1 for --help. */
int run_main(int argc, char **argv);

#endif /* VRAM_TOOLS_RUN_H */
