#include "parts.h"

unsigned long part_a(unsigned long x) {
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005UL + 1UL;
    return x % 1000003UL;
}
