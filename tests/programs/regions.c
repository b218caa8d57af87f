/* regions: the user API (include/strobe.h). Each of two threads names
 * itself and runs 5 "outer" regions, each holding 2 "inner" regions, and a
 * marker per outer region. Runs (as a no-op) without strobe too. */
#include <pthread.h>
#include <stdio.h>
#include <strobe.h>

static volatile double sink;

static void spin(long n) {
    double x = 1.0;
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1.0 / (x + (double)i);
    sink += x;
}

static void *body(void *arg) {
    strobe_set_thread_name((const char *)arg);
    for (int i = 0; i < 5; i++) {
        strobe_push_region("outer");
        for (int j = 0; j < 2; j++) {
            strobe_push_region("inner");
            spin(300000);
            strobe_pop_region();
        }
        strobe_mark("checkpoint");
        strobe_pop_region();
    }
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, body, "worker-thread-with-a-long-name");
    body("main-thread");
    pthread_join(t, NULL);
    printf("api %s\n", strobe_api() ? "present" : "absent");
    return 0;
}
