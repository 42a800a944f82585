// probe prints C's sources of nondeterminism, one per line:
// "<kind> <name> <value>". Kind "fixed" is the clock, pids and what derives
// from them (a seed change keeps it); "random" follows the seed. Built
// dynamic and -static by e2e/determinism_test.go.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>

// hex prints a random line of n bytes.
static void hex(const char *name, const unsigned char *b, size_t n) {
	printf("random %s ", name);
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	printf("\n");
}

// device prints 16 bytes read from a random device.
static int device(const char *name, const char *path) {
	unsigned char b[16];
	int fd = open(path, O_RDONLY);

	if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b) {
		perror(path);
		return 1;
	}
	close(fd);
	hex(name, b, sizeof b);
	return 0;
}

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
	hex("getrandom", buf, sizeof buf);

	struct sysinfo si;
	double loads[3];
	if (sysinfo(&si) != 0 || getloadavg(loads, 3) != 3) {
		perror("sysinfo");
		return 1;
	}
	printf("fixed sysinfo uptime=%ld loads=%lu,%lu,%lu procs=%u half_free=%d\n", si.uptime, si.loads[0],
	       si.loads[1], si.loads[2], (unsigned)si.procs, si.freeram == si.totalram / 2);
	printf("fixed getloadavg %.2f %.2f %.2f\n", loads[0], loads[1], loads[2]);
	printf("fixed times %ld\n", (long)times(NULL));
	return device("dev_urandom", "/dev/urandom") || device("dev_random", "/dev/random");
}
