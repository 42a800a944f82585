/*
 * dal's vDSO: the clock and getrandom entry points a C library or the Go
 * runtime finds through AT_SYSINFO_EHDR, served from the process's stream
 * without leaving the process. The supervisor maps it, with its data pages
 * just before it, into every new image of a strict run (see ../doc.go and
 * vdso.go, whose offsets must agree with struct data).
 *
 * Built freestanding by gen/main.go (go generate): no libc, no
 * relocations, no TLS; it may run on a Go goroutine's small stack.
 */

typedef unsigned long u64;
typedef long s64;
typedef unsigned int u32;
typedef unsigned char u8;

struct timespec { s64 tv_sec, tv_nsec; };
struct timeval { s64 tv_sec, tv_usec; };
struct timezone { int tz_minuteswest, tz_dsttime; };

#define RND_SIZE 4096

/* The data pages. The supervisor writes everything but reads and rnd_pos
 * (which only this code moves, atomically); it changes off under seq, a
 * one-byte sequence count (odd while a change is under way). */
struct data {
	u64 magic;            /* 0 */
	u8 seq;               /* 8 */
	u8 pad0[7];
	s64 off;              /* 16: base + supervisor-served reads × quantum */
	s64 quantum;          /* 24 */
	s64 epoch;            /* 32 */
	s64 mono;             /* 40 */
	u64 rnd_size;         /* 48 */
	u8 rnd_active;        /* 56: which buffer getrandom draws from */
	u8 pad1[7];
	u64 reads;            /* 64: clock reads served here */
	u64 nquiet;           /* 72: how many of quiet[] are set */
	u64 quiet[6];         /* 80: FS bases of threads whose reads do not move the clock */
	u64 rnd_pos[2][8];    /* 128, 192: bytes taken from each buffer */
	u8 pad3[4096 - 256];
	u8 rnd[2][RND_SIZE];  /* 4096, 8192 */
};

/* dal_data is the first data page, placed by vdso.lds. */
extern struct data dal_data __attribute__((visibility("hidden")));

#define NR_gettimeofday 96
#define NR_time 201
#define NR_clock_gettime 228
#define NR_clock_getres 229
#define NR_getcpu 309
#define NR_getrandom 318

static inline long sys3(long nr, long a, long b, long c)
{
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

/* kind sorts a clock id as the supervisor does: 'r' realtime, 'm'
 * monotonic, 0 served by the kernel (CPU-time clocks, unknown ids). */
static inline int kind(int id)
{
	switch (id) {
	case 0: case 5: case 8: case 11:
		return 'r';
	case 1: case 4: case 6: case 7: case 9:
		return 'm';
	}
	return 0;
}

/* quiet says the calling thread reads the clock without moving it: a
 * runtime's helper thread (Go's sysmon), whose reads depend on real time.
 * Threads are told apart by their FS base, which rdfsbase reads; the
 * supervisor sets quiet only where the kernel allows that instruction
 * (HWCAP2_FSGSBASE). */
static inline int quiet(const struct data *d)
{
	u64 n = __atomic_load_n(&d->nquiet, __ATOMIC_ACQUIRE);
	if (!n)
		return 0;
	u64 fs;
	__asm__ volatile("rdfsbase %0" : "=r"(fs));
	for (u64 i = 0; i < n && i < 6; i++)
		if (d->quiet[i] == fs)
			return 1;
	return 0;
}

/* now reads the stream's clock of kind k: one read, one quantum, or none
 * for a quiet thread, which sees the last value read. */
static s64 now(int k)
{
	struct data *d = &dal_data;
	u8 s1, s2;
	s64 off;
	for (;;) {
		s1 = __atomic_load_n(&d->seq, __ATOMIC_ACQUIRE);
		off = __atomic_load_n(&d->off, __ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&d->seq, __ATOMIC_ACQUIRE);
		if (!(s1 & 1) && s1 == s2)
			break;
		__asm__ volatile("pause");
	}
	u64 r = quiet(d) ? __atomic_load_n(&d->reads, __ATOMIC_SEQ_CST)
			 : __atomic_add_fetch(&d->reads, 1, __ATOMIC_SEQ_CST);
	s64 t = off + (s64)r * d->quantum;
	return (k == 'r' ? d->epoch : d->mono) + t;
}

static inline void split(s64 ns, s64 *sec, s64 *nsec)
{
	*sec = ns / 1000000000;
	*nsec = ns % 1000000000;
	if (*nsec < 0) {
		*sec -= 1;
		*nsec += 1000000000;
	}
}

int __vdso_clock_gettime(int id, struct timespec *ts)
{
	int k = kind(id);
	if (!k)
		return sys3(NR_clock_gettime, id, (long)ts, 0);
	s64 v = now(k);
	split(v, &ts->tv_sec, &ts->tv_nsec);
	return 0;
}

int __vdso_gettimeofday(struct timeval *tv, struct timezone *tz)
{
	if (tv) {
		s64 sec, nsec;
		split(now('r'), &sec, &nsec);
		tv->tv_sec = sec;
		tv->tv_usec = nsec / 1000;
	}
	if (tz) {
		tz->tz_minuteswest = 0;
		tz->tz_dsttime = 0;
	}
	return 0;
}

s64 __vdso_time(s64 *t)
{
	s64 sec, nsec;
	split(now('r'), &sec, &nsec);
	if (t)
		*t = sec;
	return sec;
}

int __vdso_clock_getres(int id, struct timespec *res)
{
	return sys3(NR_clock_getres, id, (long)res, 0);
}

long __vdso_getcpu(unsigned *cpu, unsigned *node, void *unused)
{
	return sys3(NR_getcpu, (long)cpu, (long)node, (long)unused);
}

/* struct vgetrandom_opaque_params (linux/random.h). */
struct params {
	u32 size_of_opaque_state, mmap_prot, mmap_flags, reserved[13];
};

#define GRND_ALL 0x7 /* NONBLOCK | RANDOM | INSECURE */

/* __vdso_getrandom takes bytes from the stream's buffer, which the
 * supervisor fills: when it runs out, the real call asks the supervisor,
 * which serves the call and refills the other buffer. The opaque state the
 * caller keeps per thread is not used. */
s64 __vdso_getrandom(void *buf, u64 len, u32 flags, void *state, u64 state_len)
{
	struct data *d = &dal_data;
	if (state_len == ~0UL && !buf && !len && !flags) {
		struct params *p = state;
		p->size_of_opaque_state = 64;
		p->mmap_prot = 0x3;   /* PROT_READ | PROT_WRITE */
		p->mmap_flags = 0x22; /* MAP_PRIVATE | MAP_ANONYMOUS */
		for (int i = 0; i < 13; i++)
			p->reserved[i] = 0;
		return 0;
	}
	if (len == 0 && !(flags & ~GRND_ALL))
		return 0;
	if (len <= d->rnd_size && !(flags & ~GRND_ALL)) {
		u8 a = __atomic_load_n(&d->rnd_active, __ATOMIC_ACQUIRE) & 1;
		u64 pos = __atomic_fetch_add(&d->rnd_pos[a][0], len, __ATOMIC_SEQ_CST);
		if (pos + len <= d->rnd_size) {
			const volatile u8 *from = d->rnd[a] + pos;
			u8 *to = buf;
			for (u64 i = 0; i < len; i++)
				to[i] = from[i];
			return len;
		}
	}
	return sys3(NR_getrandom, (long)buf, len, flags);
}

int clock_gettime(int, struct timespec *) __attribute__((weak, alias("__vdso_clock_gettime")));
int gettimeofday(struct timeval *, struct timezone *) __attribute__((weak, alias("__vdso_gettimeofday")));
s64 time(s64 *) __attribute__((weak, alias("__vdso_time")));
int clock_getres(int, struct timespec *) __attribute__((weak, alias("__vdso_clock_getres")));
long getcpu(unsigned *, unsigned *, void *) __attribute__((weak, alias("__vdso_getcpu")));
