/* Loaded into llama.cpp's tools by the tests (LD_PRELOAD, tests/conftest.py). llama.cpp
   logs from a thread that the process never joins, so lines queued just before exit()
   (often the result a test reads) were lost on a busy machine. exit() runs atexit
   handlers while other threads still run: this one waits briefly so the logger can write
   what it holds. */
#include <stdlib.h>
#include <unistd.h>

static void let_the_logger_drain(void) { usleep(300 * 1000); }

__attribute__((constructor)) static void register_drain(void) { atexit(let_the_logger_drain); }
