/* clocks: reads the clock every way the vDSO serves, in a process, a
 * forked child and (with no argument) a new image of itself. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *who = argc > 1 ? argv[1] : "first";
	printf("%s realtime %lld\n", who, ns(CLOCK_REALTIME));
	printf("%s monotonic %lld\n", who, ns(CLOCK_MONOTONIC));
	struct timeval tv;
	gettimeofday(&tv, NULL);
	printf("%s gettimeofday %lld.%06lld\n", who, (long long)tv.tv_sec, (long long)tv.tv_usec);
	printf("%s time %lld\n", who, (long long)time(NULL));
	printf("%s cputime_real %d\n", who, ns(CLOCK_PROCESS_CPUTIME_ID) < 1000000000LL * 60);
	fflush(stdout);
	if (argc > 1)
		return 0;
	pid_t c = fork();
	if (c == 0) {
		printf("child realtime %lld\n", ns(CLOCK_REALTIME));
		return 0;
	}
	waitpid(c, NULL, 0);
	printf("parent realtime %lld\n", ns(CLOCK_REALTIME));
	fflush(stdout);
	execl("/proc/self/exe", argv[0], "again", (char *)NULL);
	return 1;
}
