// probe prints C's sources of nondeterminism, one per line:
// "<kind> <name> <value>". Kind "fixed" is the clock, pids and what derives
// from them (a seed change keeps it); "random" follows the seed. Built
// dynamic and -static by e2e/determinism_test.go.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int main(void) {
	struct timespec rt, mono;
	struct timeval tv;
	unsigned char buf[16];
	time_t t = time(NULL);

	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	gettimeofday(&tv, NULL);
	printf("fixed time %lld\n", (long long)t);
	printf("fixed clock_realtime %lld.%09ld\n", (long long)rt.tv_sec, rt.tv_nsec);
	printf("fixed clock_monotonic %lld.%09ld\n", (long long)mono.tv_sec, mono.tv_nsec);
	printf("fixed gettimeofday %lld.%06ld\n", (long long)tv.tv_sec, (long)tv.tv_usec);
	printf("fixed getpid %d\n", (int)getpid());
	srand((unsigned)(t ^ getpid()));
	printf("fixed rand %d\n", rand());
	if (getrandom(buf, sizeof buf, 0) != (ssize_t)sizeof buf) {
		perror("getrandom");
		return 1;
	}
	printf("random getrandom ");
	for (size_t i = 0; i < sizeof buf; i++)
		printf("%02x", buf[i]);
	printf("\n");
	return 0;
}
