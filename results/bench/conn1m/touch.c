#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){size_t n=(size_t)atol(argv[1])<<20;int gap=atoi(argv[2]);
for(int r=0;r<3;r++){char*p=mmap(0,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
madvise(p,n,MADV_NOHUGEPAGE);double t=now();for(size_t i=0;i<n;i+=4096)p[i]=1;double d=now()-t;
printf("round %d: %.2f us per 4K page first touch\n",r,d/(n/4096)*1e6);fflush(stdout);munmap(p,n);sleep(gap);}}
