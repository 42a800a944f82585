//go:build linux && (amd64 || arm64)

package ebpf

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	cebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

const notObserved = ", so no syscall is observed"

// unavailable turns a load or attach failure into an *UnavailableError that
// says in one sentence why tracing is off.
func unavailable(err error) error {
	var ve *cebpf.VerifierError
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		switch {
		case !bpfCapable():
			return &UnavailableError{Reason: "loading eBPF programs needs root (or CAP_BPF and CAP_PERFMON)" + notObserved, Err: err}
		case lockdown() != "":
			return &UnavailableError{Reason: "the kernel is locked down (" + lockdown() + "), which forbids eBPF reads of process memory" + notObserved, Err: err}
		default:
			return &UnavailableError{Reason: "the kernel refused the eBPF programs (operation not permitted: memlock limit, seccomp or a security module)" + notObserved, Err: err}
		}
	case errors.As(err, &ve):
		return &UnavailableError{Reason: "the kernel's verifier rejected the boundary programs (" + lastLine(ve) + ")" + notObserved, Err: err}
	case errors.Is(err, btf.ErrNotFound) || errors.Is(err, unix.ENOENT) || errors.Is(err, cebpf.ErrNotSupported):
		return &UnavailableError{Reason: "the kernel lacks a BTF tracepoint the tracer needs (sys_enter, sched_process_fork/exec/exit) or CO-RE support (" + firstLine(err) + ")" + notObserved, Err: err}
	}
	return &UnavailableError{Reason: "the eBPF programs could not be loaded (" + firstLine(err) + ")" + notObserved, Err: err}
}

// bpfCapable reports whether this process holds CAP_SYS_ADMIN, or CAP_BPF
// with CAP_PERFMON, in its effective set.
func bpfCapable() bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true // unknown: do not blame capabilities
	}
	for line := range strings.Lines(string(status)) {
		hex, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return true
		}
		has := func(c uint) bool { return caps&(1<<c) != 0 }
		return has(unix.CAP_SYS_ADMIN) || has(unix.CAP_BPF) && has(unix.CAP_PERFMON)
	}
	return true
}

// lockdown returns the kernel lockdown mode, or "" when there is none.
func lockdown() string {
	raw, err := os.ReadFile("/sys/kernel/security/lockdown")
	if err != nil {
		return ""
	}
	s := string(raw)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i || s[i+1:j] == "none" {
		return ""
	}
	return "lockdown=" + s[i+1:j]
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func lastLine(ve *cebpf.VerifierError) string {
	for i := len(ve.Log) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(ve.Log[i]); l != "" {
			return l
		}
	}
	return fmt.Sprint(ve.Cause)
}
