// stack prints where its stack is: with ASLR off the address depends only
// on what the kernel put above it (argv, the environment, the auxiliary
// vector). Programs use such addresses as entropy: glibc names mktemp's
// file from one, with the monotonic clock. Lines as in probe.c.
#include <stdio.h>

extern char **environ;

int main(int argc, char **argv) {
	int local;
	size_t env = 0;

	(void)argc;
	(void)argv;
	for (char **e = environ; *e; e++)
		for (char *c = *e; *c; c++)
			env++;
	printf("fixed stack_address %p\n", (void *)&local);
	printf("fixed environment_bytes %zu\n", env);
	return 0;
}
