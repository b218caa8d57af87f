unsigned long part_a(unsigned long);
unsigned long part_b(unsigned long);
unsigned long part_c(unsigned long);
unsigned long part_d(unsigned long);
unsigned long part_e(unsigned long);
unsigned long part_f(unsigned long);
