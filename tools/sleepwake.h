/*
 * sleepwake.h: `vram sleep` and `vram wake` (sleepwake.c).
 */
#ifndef VRAM_TOOLS_SLEEPWAKE_H
#define VRAM_TOOLS_SLEEPWAKE_H

/* argv[0] is "sleep" or "wake" (wake: 1). Returns the exit status, or -1 for --help. */
int sleep_main(int argc, char **argv, int wake);

#endif /* VRAM_TOOLS_SLEEPWAKE_H */
