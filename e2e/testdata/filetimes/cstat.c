// Prints what each call of the stat family shows of a file: its modification
// time in ns and its inode number, through glibc (stat, lstat, fstat,
// fstatat) and the raw statx system call.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void show(const char *call, int rc, struct stat *st) {
	if (rc != 0) {
		printf("c %s failed\n", call);
		return;
	}
	printf("c %s %lld %llu\n", call, (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
	       (unsigned long long)st->st_ino);
}

int main(int argc, char **argv) {
	const char *p = argv[1];
	struct stat st;
	show("stat", stat(p, &st), &st);
	show("lstat", lstat(p, &st), &st);
	int fd = open(p, O_RDONLY);
	show("fstat", fstat(fd, &st), &st);
	show("fstatat", fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW), &st);
	struct statx sx;
	if (syscall(SYS_statx, AT_FDCWD, p, 0, STATX_BASIC_STATS | STATX_BTIME, &sx) == 0) {
		printf("c statx %lld %llu btime %lld\n", (long long)sx.stx_mtime.tv_sec * 1000000000LL + sx.stx_mtime.tv_nsec,
		       (unsigned long long)sx.stx_ino, (long long)sx.stx_btime.tv_sec * 1000000000LL + sx.stx_btime.tv_nsec);
	}
	return 0;
}
