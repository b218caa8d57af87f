/* Spends 1 s of CPU time (its own clock: user and kernel time) making
 * system calls (getppid), nearly all of it in the kernel on behalf of
 * syscalls(). CPU time, not wall time: on a loaded machine it still burns
 * the whole second. */
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
__attribute__((noinline)) void syscalls(double sec){ struct timespec t,s; clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&s); do { for(int i=0;i<100;i++) syscall(SYS_getppid); clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);} while((t.tv_sec-s.tv_sec)+(t.tv_nsec-s.tv_nsec)*1e-9<sec); }
int main(void){ syscalls(1.0); return 0; }
