/* A library named like an XPTI-instrumented runtime (libsycl*), which never
 * initializes XPTI: linked into xpti_not_initialized.c. */
int sycl_strobe_test_answer(void) { return 42; }
