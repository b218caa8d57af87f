/* The main thread and one worker each burn 1 s of CPU at the same time;
 * at the end the process's own CPU time (CLOCK_PROCESS_CPUTIME_ID) is
 * printed on stderr as "process_cpu_ns N". */
#include <pthread.h>
#include <time.h>
#include <stdio.h>
static volatile double s;
static double cpu(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void burn(double sec){double e=cpu()+sec;while(cpu()<e)for(int i=0;i<1000;i++)s+=i*0.5;}
static void*w(void*a){(void)a;burn(1.0);return 0;}
int main(void){
    pthread_t t;pthread_create(&t,0,w,0);burn(1.0);pthread_join(t,0);
    struct timespec p;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&p);
    fprintf(stderr,"process_cpu_ns %lld\n",(long long)p.tv_sec*1000000000LL+p.tv_nsec);
    return 0;
}
