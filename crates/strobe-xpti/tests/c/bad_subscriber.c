/* A library that is not a valid subscriber: it lacks xptiTraceFinish. */
#include "xpti/xpti_trace_framework.h"
XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor,
                                     const char *version, const char *stream) {
  (void)major; (void)minor; (void)version; (void)stream;
}
