/* Loads libsycl_strobe_test.so (named like a SYCL runtime) and never
 * initializes XPTI, as a runtime whose proxy unloaded the dispatcher.
 * With the argument "init-only", instead calls the xptiTraceInit that the
 * preloaded strobe runtime exports (as a dispatcher would) while no
 * dispatcher is loaded. Prints "answer 42". */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int sycl_strobe_test_answer(void);

typedef void (*trace_init_t)(unsigned, unsigned, const char *, const char *);

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "init-only") == 0) {
    trace_init_t init = (trace_init_t)dlsym(RTLD_DEFAULT, "xptiTraceInit");
    if (init) init(1, 0, "1.0", "orphan.stream");
  }
  printf("answer %d\n", sycl_strobe_test_answer());
  return 0;
}
