/* Spends 1 s of wall time making system calls (getppid), nearly all of it
 * CPU time in the kernel on behalf of syscalls(). */
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
__attribute__((noinline)) void syscalls(double sec){ struct timespec t,s; clock_gettime(CLOCK_MONOTONIC,&s); do { for(int i=0;i<100;i++) syscall(SYS_getppid); clock_gettime(CLOCK_MONOTONIC,&t);} while((t.tv_sec-s.tv_sec)+(t.tv_nsec-s.tv_nsec)*1e-9<sec); }
int main(void){ syscalls(1.0); return 0; }
