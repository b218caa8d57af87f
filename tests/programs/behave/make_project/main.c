#include <stdio.h>
#include "parts.h"

int main(void) {
    unsigned long x = 1;
    x = part_a(x);
    x = part_b(x);
    x = part_c(x);
    x = part_d(x);
    x = part_e(x);
    x = part_f(x);
    printf("result %lu\n", x);
    return 0;
}
