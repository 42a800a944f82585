// trapcost N: what an in-process syscall handler would cost (the design in
// docs/design.md §3.2): a call the seccomp filter traps (SECCOMP_RET_TRAP)
// and a SIGSYS handler answers, against the call made plainly. Two calls:
// getppid, which the handler answers itself (the trap's own cost), and
// newfstatat, which the handler makes from its own syscall instruction,
// let through by a marker in the unused sixth argument (what a stat of a
// file older than the run would cost). Prints ns per call.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define MARK 0x5a5a

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void handler(int sig, siginfo_t *si, void *ctx) {
	(void)sig;
	greg_t *r = ((ucontext_t *)ctx)->uc_mcontext.gregs;
	if (si->si_syscall == SYS_getppid) {
		r[REG_RAX] = 42;
		return;
	}
	long ret;
	register long r10 asm("r10") = r[REG_R10];
	register long r9 asm("r9") = MARK;
	asm volatile("syscall"
		     : "=a"(ret)
		     : "0"(SYS_newfstatat), "D"(r[REG_RDI]), "S"(r[REG_RSI]), "d"(r[REG_RDX]), "r"(r10), "r"(r9)
		     : "rcx", "r11", "memory");
	r[REG_RAX] = ret;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: trapcost N\n");
		return 2;
	}
	long n = atol(argv[1]);
	int dir = open(".", O_RDONLY | O_DIRECTORY);
	int f = open("trapcost.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (dir < 0 || f < 0) {
		perror("trapcost");
		return 1;
	}
	struct stat st;
	double t = now();
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	double getppid = now() - t;
	t = now();
	for (long i = 0; i < n; i++)
		fstatat(dir, "trapcost.txt", &st, AT_SYMLINK_NOFOLLOW);
	double fstat = now() - t;

	struct sigaction sa = {0};
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSYS, &sa, 0);
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_newfstatat, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[5])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MARK, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = {sizeof prog / sizeof prog[0], prog};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)) {
		perror("seccomp");
		return 1;
	}
	t = now();
	for (long i = 0; i < n; i++)
		if (syscall(SYS_getppid) != 42) {
			fprintf(stderr, "trapcost: getppid was not trapped\n");
			return 1;
		}
	double getppidTrapped = now() - t;
	t = now();
	for (long i = 0; i < n; i++)
		if (fstatat(dir, "trapcost.txt", &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode)) {
			perror("trapcost: trapped fstatat");
			return 1;
		}
	double fstatTrapped = now() - t;
	printf("getppid %.0f\ngetppid_trapped %.0f\nfstatat %.0f\nfstatat_trapped %.0f\n", getppid / n * 1e9,
	       getppidTrapped / n * 1e9, fstat / n * 1e9, fstatTrapped / n * 1e9);
	return 0;
}
