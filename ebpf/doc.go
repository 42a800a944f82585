// Package ebpf will hold dald's boundary tracer: CO-RE eBPF programs on raw
// and BTF tracepoints that count the session's syscalls per nondeterminism
// category (DESIGN §8). It is empty until the boundary-coverage issue lands;
// nothing in dal claims boundary coverage yet.
package ebpf
