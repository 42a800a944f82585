// Makes a file, then looks at it n times: statloop OP N, OP one of
// stat-rel (stat of a relative path), stat-abs (an absolute one), stat-at
// (fstatat of a name in a directory descriptor, as find and ls make) and
// fstat.
// For BenchmarkStatUnderTheLayer: a run with N=0 is the baseline.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: statloop stat-rel|stat-abs|stat-at|fstat N\n");
		return 2;
	}
	const char *op = argv[1];
	long n = atol(argv[2]);
	int fd = open("statloop.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "x\n", 2) != 2) {
		perror("statloop.txt");
		return 1;
	}
	char abs[4096];
	if (!getcwd(abs, sizeof abs - 16)) {
		perror("getcwd");
		return 1;
	}
	strcat(abs, "/statloop.txt");
	int dir = open(".", O_RDONLY | O_DIRECTORY);
	if (dir < 0) {
		perror(".");
		return 1;
	}
	struct stat st;
	long sum = 0;
	for (long i = 0; i < n; i++) {
		int rc;
		if (!strcmp(op, "fstat"))
			rc = fstat(fd, &st);
		else if (!strcmp(op, "stat-at"))
			rc = fstatat(dir, "statloop.txt", &st, AT_SYMLINK_NOFOLLOW);
		else if (!strcmp(op, "stat-abs"))
			rc = stat(abs, &st);
		else
			rc = stat("statloop.txt", &st);
		if (rc != 0) {
			perror("stat");
			return 1;
		}
		sum += st.st_mtim.tv_nsec & 1;
	}
	printf("%ld\n", sum);
	return 0;
}
