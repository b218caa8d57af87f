/* A library whose constructor sleeps LEAVE_CHILD_SLOW_MS milliseconds when
 * that variable is set. It runs before a preloaded library's constructor
 * (dependencies are initialised first), so it delays the moment the strobe
 * runtime of the process starts. */
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void slow_start(void) {
    const char *ms = getenv("LEAVE_CHILD_SLOW_MS");
    if (ms) usleep(atoi(ms) * 1000);
}
