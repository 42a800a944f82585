/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * dal's boundary tracer: counts the syscalls of tracked process trees per
 * session and syscall number, and sends the rare notable crossings (connect
 * destinations, opens of /dev/random, /dev/urandom and the kernel's UUIDs
 * in /proc/sys/kernel/random, execs, writes outside
 * the workspace) to user space through a ring buffer. The package doc
 * (../doc.go) describes the semantics. This file carries no syscall numbers
 * and no kernel struct layout: the loader sets both from Go's syscall table
 * and the running kernel's BTF, so one object serves amd64 and arm64.
 */
#include "kernel.h"

#define NR_COUNTED 512 /* syscall numbers counted by name; larger ones go to NR_COUNTED-1 */
#define IDX_DROPS NR_COUNTED /* in a session's counters: its events lost to a full ring buffer */
#define PATH_LEN 256
#define PREFIX_WORDS 16 /* workspace prefix: up to 128 bytes, compared 8 at a time */
#define NO_EXEC 0xffffffffu
#define CACHE_BITS 6 /* thread_cache: 64 entries per CPU */
#define NO_SLOT 0xffffffffu /* a cached thread that counts for no session */

/* What sys_enter does with a syscall beyond counting it (syscall_actions). */
enum action {
	ACT_NONE = 0,
	ACT_CONNECT = 1,  /* connect(fd, addr, len) */
	ACT_SENDTO = 2,   /* sendto(fd, buf, n, flags, addr, len) */
	ACT_OPEN = 3,     /* open(path, flags, mode) */
	ACT_OPENAT = 4,   /* openat(dfd, path, flags, mode) */
	ACT_OPENAT2 = 5,  /* openat2(dfd, path, how, size) */
	ACT_CREAT = 6,    /* creat(path, mode) */
	ACT_EXEC = 7,     /* execve and execveat: remembered for the counting start */
};

enum kind {
	KIND_CONNECT = 1,
	KIND_SENDTO = 2,
	KIND_RANDOM_DEVICE = 3,
	KIND_EXEC = 4,
	KIND_WRITE_OUTSIDE = 5,
};

/* Indexes into the per-CPU losses array. */
enum loss {
	LOSS_EVENTS = 0,   /* ring buffer full: event dropped */
	LOSS_FORKS = 1,    /* tasks map full: a forked process was not followed */
	LOSS_MAX = 2,
};

struct task_state {
	__u32 session;    /* the session's key: user space never reuses one */
	__u32 slot;       /* the session's index in counters and slot_owner */
	__u32 execs_left; /* execs still to happen before counting starts */
	__u32 exec_nr;    /* the exec syscall entered since Track or the last exec, or NO_EXEC */
};

/* A session's settings: written by user space only. */
struct session {
	__u32 closed;     /* Untrack ran: forks are no longer followed */
	__u32 prefix_len; /* workspace prefix length, 0: no write check */
	/* The workspace prefix (ends with '/') as little-endian words, and
	 * which of their bytes belong to it. */
	__u64 prefix[PREFIX_WORDS];
	__u64 mask[PREFIX_WORDS];
};

/*
 * A thread as this CPU last saw it: its register frame (task_pt_regs, the
 * first argument of sys_enter, which no two live threads share) and the
 * session it counts for, or NO_SLOT when it counts for none (outside every
 * session, or before its counting exec). Valid while generation has not
 * moved since it was written.
 */
struct cached {
	__u64 regs;
	__u64 gen;
	__u32 slot;
	__u32 session;
};

struct syscall_action {
	__u32 action;
};

struct dest_key {
	__u32 session;
	__u16 family;
	__u16 port;
	__u8 addr[16];
};

struct event {
	__u32 session;
	__u32 pid;
	__u8 kind;
	__u8 pad;
	__u16 family;
	__u16 port; /* network byte order */
	__u16 pad2;
	__u8 addr[16];
	char path[PATH_LEN];
};

#define PID_WORDS (4194304 / 64) /* PID_MAX_LIMIT bits */

/*
 * One bit per tgid: is there a tasks entry? A bit is set after its entry is
 * added and cleared before it is removed; user space maps the array and
 * sets and clears bits with atomic operations too.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PID_WORDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} tracked_pids SEC(".maps");

/* Sizes are set from Options at Open; these are the defaults. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32); /* tgid */
	__type(value, struct task_state);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct session);
} sessions SEC(".maps");

/* A session's counters, created by user space when the session is
 * registered: one per syscall number below NR_COUNTED, then IDX_DROPS. */
struct counter_block {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_COUNTED + 1);
	__type(key, __u32);
	__type(value, __u64);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 4096);
	__type(key, __u32); /* slot */
	__array(values, struct counter_block);
} counters SEC(".maps");

/* slot → the key of the session that holds it (0: free). User space sets it
 * after installing the slot's counters and clears it before removing them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} slot_owner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << CACHE_BITS);
	__type(key, __u32);
	__type(value, struct cached);
} thread_cache SEC(".maps");

/*
 * Moves whenever what thread_cache says of a thread may have changed: a
 * tracked process starts a thread or a process, or one of its threads
 * exits (a register frame is on a thread's stack, which the kernel hands
 * to the next new thread, of any process), a process starts counting at
 * its exec, user space tracks, untracks or forgets a session or reattaches
 * the programs. Mapped into user space, which adds to it atomically.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} generation SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NR_COUNTED);
	__type(key, __u32);
	__type(value, struct syscall_action);
} syscall_actions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct dest_key);
	__type(value, __u8);
} sent_to SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOSS_MAX);
	__type(key, __u32);
	__type(value, __u64);
} losses SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * Kernel layout, set by the loader from the running kernel's BTF before the
 * programs are verified (read-only data: the verifier sees constants).
 */
const volatile __u32 task_tgid_off = 0;     /* struct task_struct, tgid */
const volatile __u32 bprm_filename_off = 0; /* struct linux_binprm, filename */
const volatile __u32 regs_arg_off[6] = {};  /* struct pt_regs: syscall arguments 0..5 */

/* Argument i of the syscall being entered, from its register frame. */
static __always_inline __u64 arg(const void *regs, int i)
{
	__u64 v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), (const char *)regs + regs_arg_off[i]);
	return v;
}

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

#define O_ACCMODE 03
#define O_CREAT 0100
#define O_TRUNC 01000

/* The word of tracked_pids holding tgid's bit, or 0 past PID_MAX_LIMIT. */
static __always_inline __u64 *pid_word(__u32 tgid)
{
	__u32 word = tgid / 64;
	return bpf_map_lookup_elem(&tracked_pids, &word);
}

/* One array lookup and a bit test: may tgid have a tasks entry? */
static __always_inline int tracked(__u32 tgid)
{
	__u64 *w = pid_word(tgid);
	return w && (*w & (1ULL << (tgid % 64)));
}

static __always_inline __u64 *generation_word(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&generation, &zero);
}

/* Invalidates every CPU's thread_cache. */
static __always_inline void bump_generation(void)
{
	__u64 *g = generation_word();
	if (g)
		__sync_fetch_and_add(g, 1);
}

static __always_inline void lose(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&losses, &which);
	if (n)
		__sync_fetch_and_add(n, 1);
}

/*
 * Adds one to counter idx of the session in slot, if that session still
 * holds the slot (a forgotten session's straggler counts nowhere). Every
 * lookup here is inlined by the verifier; the counter is the CPU's own and
 * every program runs with preemption off, so a plain increment is exact.
 * The counters are looked up before the owner is checked: user space
 * clears the owner before it removes a slot's counters and installs new
 * counters before it sets the new owner.
 */
static __always_inline void count(__u32 slot, __u32 session, __u32 idx)
{
	void *block = bpf_map_lookup_elem(&counters, &slot);
	__u32 *owner = bpf_map_lookup_elem(&slot_owner, &slot);
	if (!block || !owner || *owner != session)
		return;
	__u64 *n = bpf_map_lookup_elem(block, &idx);
	if (n)
		*n += 1;
}

static __always_inline struct event *reserve(__u32 session, __u32 slot, __u32 pid, __u8 kind)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		lose(LOSS_EVENTS);
		count(slot, session, IDX_DROPS);
		return 0;
	}
	e->session = session;
	e->pid = pid;
	e->kind = kind;
	e->pad = 0;
	e->family = 0;
	e->port = 0;
	e->pad2 = 0;
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	e->path[0] = 0;
	return e;
}

/* Reads the inet part of a user sockaddr: family, port, address. Returns the
 * family, or 0 when it is neither AF_INET nor AF_INET6 or cannot be read. */
static __always_inline __u16 read_inet(const void *uaddr, __u64 len, __u16 *port, __u8 addr[16])
{
	__u16 family = 0;
	if (!uaddr || len < 2 || bpf_probe_read_user(&family, sizeof(family), uaddr))
		return 0;
	if (family == AF_INET && len >= 8) {
		__u8 raw[8]; /* family, port, address */
		if (bpf_probe_read_user(raw, sizeof(raw), uaddr))
			return 0;
		*port = raw[2] | (raw[3] << 8);
		__builtin_memcpy(addr, raw + 4, 4);
		return family;
	}
	if (family == AF_INET6 && len >= 24) {
		__u8 raw[24]; /* family, port, flowinfo, address */
		if (bpf_probe_read_user(raw, sizeof(raw), uaddr))
			return 0;
		*port = raw[2] | (raw[3] << 8);
		__builtin_memcpy(addr, raw + 8, 16);
		return family;
	}
	return 0;
}

__attribute__((noinline)) int on_connect(__u64 regs_addr, __u32 session, __u32 slot, __u32 pid)
{
	const void *regs = (const void *)regs_addr;
	const void *uaddr = (const void *)arg(regs, 1);
	__u64 len = arg(regs, 2);
	__u16 family = 0;
	if (!uaddr || len < 2 || bpf_probe_read_user(&family, sizeof(family), uaddr))
		return 0;
	if (family != AF_INET && family != AF_INET6 && family != AF_UNIX)
		return 0;
	struct event *e = reserve(session, slot, pid, KIND_CONNECT);
	if (!e)
		return 0;
	e->family = family;
	if (family == AF_UNIX) {
		/* sun_path: not always NUL-terminated; abstract names start with NUL. */
		__u64 n = len - 2;
		if (n > 108)
			n = 108;
		if (bpf_probe_read_user(e->path, n & 127, (const char *)uaddr + 2))
			e->path[0] = 0;
		e->path[n & 127] = 0;
	} else if (!read_inet(uaddr, len, &e->port, e->addr)) {
		e->family = 0;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* sendto with a destination: one event per (session, destination), so that a
 * UDP stream does not flood the ring. */
__attribute__((noinline)) int on_sendto(__u64 regs_addr, __u32 session, __u32 slot, __u32 pid)
{
	const void *regs = (const void *)regs_addr;
	struct dest_key key = {.session = session};
	key.family = read_inet((const void *)arg(regs, 4), arg(regs, 5), &key.port, key.addr);
	if (!key.family)
		return 0;
	__u8 seen = 1;
	if (bpf_map_update_elem(&sent_to, &key, &seen, BPF_NOEXIST))
		return 0; /* already reported */
	struct event *e = reserve(session, slot, pid, KIND_SENDTO);
	if (!e)
		return 0;
	e->family = key.family;
	e->port = key.port;
	__builtin_memcpy(e->addr, key.addr, sizeof(e->addr));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

static __always_inline int is_random_device(const char *p)
{
	/* "/dev/random" or "/dev/urandom", NUL-terminated. */
	if (p[0] != '/' || p[1] != 'd' || p[2] != 'e' || p[3] != 'v' || p[4] != '/')
		return 0;
	const char *q = p + 5;
	if (q[0] == 'u')
		q++;
	return q[0] == 'r' && q[1] == 'a' && q[2] == 'n' && q[3] == 'd' && q[4] == 'o' && q[5] == 'm' && q[6] == 0;
}

/* "/proc/sys/kernel/random/uuid" (a new UUID at each read) or ".../boot_id",
 * NUL-terminated: p holds at least 32 bytes. */
static __always_inline int is_proc_random(const char *p)
{
	const char *dir = "/proc/sys/kernel/random/";
#pragma unroll
	for (int i = 0; i < 24; i++)
		if (p[i] != dir[i])
			return 0;
	const char *q = p + 24;
	if (q[0] == 'u' && q[1] == 'u' && q[2] == 'i' && q[3] == 'd' && q[4] == 0)
		return 1;
	return q[0] == 'b' && q[1] == 'o' && q[2] == 'o' && q[3] == 't' && q[4] == '_' && q[5] == 'i' && q[6] == 'd' && q[7] == 0;
}

/* Is this absolute path outside the session's workspace? A straight
 * comparison of the first 128 bytes, word by word: no branch, no loop for the
 * verifier to walk. The path is not resolved: ".." and symlinks are taken as
 * written. */
static __always_inline int outside(const struct event *e, const struct session *s)
{
	const __u64 *p = (const __u64 *)e->path;
	__u64 diff = 0;
#pragma unroll
	for (int i = 0; i < PREFIX_WORDS; i++)
		diff |= (p[i] ^ s->prefix[i]) & s->mask[i];
	return diff != 0;
}

__attribute__((noinline)) int on_open(__u64 upath_addr, __u64 flags, __u32 session, __u32 slot, __u32 pid)
{
	const char *upath = (const char *)upath_addr;
	char head[32];
	if (bpf_probe_read_user_str(head, sizeof(head), upath) > 0 && (is_random_device(head) || is_proc_random(head))) {
		struct event *e = reserve(session, slot, pid, KIND_RANDOM_DEVICE);
		if (e) {
			__builtin_memcpy(e->path, head, sizeof(head));
			bpf_ringbuf_submit(e, 0);
		}
		return 0;
	}
	if (!(flags & O_ACCMODE) && !(flags & (O_CREAT | O_TRUNC)))
		return 0;
	if (head[0] != '/')
		return 0; /* relative to a directory the kernel has not resolved yet */
	struct session *s = bpf_map_lookup_elem(&sessions, &session);
	if (!s || !s->prefix_len)
		return 0;
	struct event *e = reserve(session, slot, pid, KIND_WRITE_OUTSIDE);
	if (!e)
		return 0;
	if (bpf_probe_read_user_str(e->path, sizeof(e->path), upath) <= 0 || !outside(e, s)) {
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* Notes what this CPU learnt of the thread whose register frame is regs. */
static __always_inline void remember(struct cached *c, __u64 regs, __u64 gen, __u32 slot, __u32 session)
{
	c->regs = regs;
	c->gen = gen;
	c->slot = slot;
	c->session = session;
}

/*
 * sys_enter(regs, id), raw: ctx holds the tracepoint's arguments. The
 * programs are attached only while a session is followed; every syscall on
 * the machine then runs this. The fast path, for a thread this CPU has
 * seen since the generation last moved and a syscall with nothing to
 * inspect, is three inlined array lookups and, for a counting thread, the
 * count: no helper call, no hash lookup.
 */
SEC("raw_tracepoint/sys_enter")
int sys_enter(__u64 *ctx)
{
	__u64 regs = ctx[0];
	__u64 id = ctx[1];
	__u32 nr = id < NR_COUNTED ? (__u32)id : NR_COUNTED - 1;
	__u32 idx = (regs * 0x9E3779B97F4A7C15ULL) >> (64 - CACHE_BITS);
	struct cached *c = bpf_map_lookup_elem(&thread_cache, &idx);
	struct syscall_action *a = bpf_map_lookup_elem(&syscall_actions, &nr);
	__u64 *gen = generation_word();
	if (!c || !a || !gen)
		return 0;
	__u32 act = a->action;
	if (c->regs == regs && c->gen == *gen && act == ACT_NONE) {
		if (c->slot != NO_SLOT)
			count(c->slot, c->session, nr);
		return 0;
	}

	/* Read first, with a full barrier: what is found below was not yet
	 * changed when this generation was current. */
	__u64 g = __sync_fetch_and_add(gen, 0);
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tracked(tgid)) {
		remember(c, regs, g, NO_SLOT, 0);
		return 0; /* not a tracked process */
	}
	struct task_state *t = bpf_map_lookup_elem(&tasks, &tgid);
	if (!t)
		return 0;

	/* Remember an exec attempt: its success (sched_process_exec) belongs
	 * to the session, and may start the counting, only if it was entered
	 * while tracked. */
	if (act == ACT_EXEC)
		t->exec_nr = nr;
	if (t->execs_left) {
		remember(c, regs, g, NO_SLOT, 0);
		return 0; /* not counting yet */
	}
	__u32 session = t->session, slot = t->slot;
	count(slot, session, nr);
	remember(c, regs, g, slot, session);

	switch (act) {
	case ACT_CONNECT:
		on_connect(regs, session, slot, tgid);
		break;
	case ACT_SENDTO:
		on_sendto(regs, session, slot, tgid);
		break;
	case ACT_OPEN:
		on_open(arg((const void *)regs, 0), arg((const void *)regs, 1), session, slot, tgid);
		break;
	case ACT_OPENAT:
		on_open(arg((const void *)regs, 1), arg((const void *)regs, 2), session, slot, tgid);
		break;
	case ACT_OPENAT2: {
		__u64 flags = 0; /* struct open_how starts with flags */
		bpf_probe_read_user(&flags, sizeof(flags), (const void *)arg((const void *)regs, 2));
		on_open(arg((const void *)regs, 1), flags, session, slot, tgid);
		break;
	}
	case ACT_CREAT:
		on_open(arg((const void *)regs, 0), O_CREAT | O_TRUNC | 1, session, slot, tgid);
		break;
	}
	return 0;
}

/* sched_process_fork(parent, child), in the parent's context, before the child runs. */
SEC("raw_tracepoint/sched_process_fork")
int process_fork(__u64 *ctx)
{
	const char *child = (const char *)ctx[1];
	__u32 ptgid = bpf_get_current_pid_tgid() >> 32;
	if (!tracked(ptgid))
		return 0;
	__u32 ctgid = 0;
	if (bpf_probe_read_kernel(&ctgid, sizeof(ctgid), child + task_tgid_off) || !ctgid)
		return 0;
	if (ctgid == ptgid) {
		/* A thread: the process entry covers it, but its stack may be
		 * one whose earlier thread this CPU cached as not counting. */
		bump_generation();
		return 0;
	}
	struct task_state *t = bpf_map_lookup_elem(&tasks, &ptgid);
	if (!t)
		return 0;
	struct session *s = bpf_map_lookup_elem(&sessions, &t->session);
	if (!s || s->closed)
		return 0;
	struct task_state c = {.session = t->session, .slot = t->slot, .execs_left = t->execs_left, .exec_nr = NO_EXEC};
	__u64 *w = pid_word(ctgid);
	if (!w || bpf_map_update_elem(&tasks, &ctgid, &c, BPF_ANY)) {
		lose(LOSS_FORKS);
		return 0;
	}
	__sync_fetch_and_or(w, 1ULL << (ctgid % 64));
	bump_generation(); /* after the bit: see sys_enter */
	return 0;
}

/* sched_process_exec(p, old_pid, bprm), in the context of the process that exec'd. */
SEC("raw_tracepoint/sched_process_exec")
int process_exec(__u64 *ctx)
{
	const char *bprm = (const char *)ctx[2];
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!tracked(tgid))
		return 0;
	struct task_state *t = bpf_map_lookup_elem(&tasks, &tgid);
	if (!t)
		return 0;
	/* An exec whose syscall was entered before Track is not the
	 * session's: user space may Track between the exec closing its
	 * close-on-exec descriptors (how os/exec learns that it succeeded)
	 * and this tracepoint. */
	__u32 nr = t->exec_nr;
	if (nr == NO_EXEC)
		return 0;
	t->exec_nr = NO_EXEC;
	if (t->execs_left) {
		t->execs_left--;
		if (t->execs_left)
			return 0;
		/* The exec that starts the counting is itself counted, as
		 * strace -f -c counts the traced command's execve. */
		count(t->slot, t->session, nr);
		bump_generation(); /* the process counts from now on */
	}
	struct event *e = reserve(t->session, t->slot, tgid, KIND_EXEC);
	if (!e)
		return 0;
	const char *filename = 0;
	if (bpf_probe_read_kernel(&filename, sizeof(filename), bprm + bprm_filename_off) ||
	    bpf_probe_read_kernel_str(e->path, sizeof(e->path), filename) <= 0)
		e->path[0] = 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* sched_process_exit(p, group_dead), in the exiting thread's context. */
SEC("raw_tracepoint/sched_process_exit")
int process_exit(__u64 *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 *w = pid_word(tgid);
	__u64 bit = 1ULL << (tgid % 64);
	if (!w || !(*w & bit))
		return 0;
	if ((__u8)ctx[1]) { /* the last thread of the process */
		__sync_fetch_and_and(w, ~bit);
		bpf_map_delete_elem(&tasks, &tgid);
	}
	/* The thread's register frame, the key of thread_cache, may be a new
	 * thread's next, of any process. */
	bump_generation();
	return 0;
}
