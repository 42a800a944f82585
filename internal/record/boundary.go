package record

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dal-runtime/dal/ebpf"
	"github.com/dal-runtime/dal/internal/boundary"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/sysvirt"
	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/vclock"
)

// boundaryInput is what a recording knows when it writes syscalls.json.
type boundaryInput struct {
	trace      *runner.Trace
	clock      *vclock.File
	mode       string
	network    *NetworkEnv
	exchanges  int
	daldSocket string // dal's own socket: the shims' connections to it are dal's
	// The sandbox's workspace and whether it had private /tmp, /run...:
	// a Unix socket there is one the agent bound itself.
	workspace  string
	privateTmp bool
	// virt is the syscall layer's configuration and counts (nil: it was
	// off or left nothing).
	virt    *sysvirt.Counts
	virtCfg sysvirt.Config
}

// newBoundary computes syscalls.json.
func newBoundary(in boundaryInput) *boundary.Boundary {
	b := &boundary.Boundary{Version: boundary.Version, Categories: map[string]*boundary.CategoryCover{}, Escapes: []boundary.Escape{}}
	for _, c := range ebpf.Categories {
		b.Categories[string(c)] = &boundary.CategoryCover{}
	}
	cat := func(c ebpf.Category) *boundary.CategoryCover { return b.Categories[string(c)] }

	var reads, draws int64
	streams := 0
	if in.clock != nil {
		for _, s := range in.clock.Streams {
			streams++
			reads += s.Reads
			for _, n := range s.Draws {
				draws += n
			}
		}
	}
	b.NotObservable = []string{
		fmt.Sprintf("clock reads served by the vDSO (clock_gettime, gettimeofday, time) never enter the kernel: the shims counted %d", reads),
		fmt.Sprintf("getrandom served by the vDSO (glibc 2.41+, Go 1.24+) never enters the kernel: the shims counted %d bytes drawn", draws),
	}
	shimmed := in.mode != "default" && streams > 0
	cat(ebpf.Clock).Shim, cat(ebpf.Clock).Captured = reads, shimmed
	cat(ebpf.Random).Shim, cat(ebpf.Random).Captured = draws, shimmed
	if shimmed {
		cat(ebpf.Clock).Record, cat(ebpf.Random).Record = "clock.json", "clock.json"
	}
	layerClock, layerRandom := false, false
	if v := in.virt; v != nil {
		b.SyscallLayer = syscallLayer(v)
		// The layer serves every process from env.json's seed and
		// epoch: captured unless something escaped it.
		layerClock = in.virtCfg.Clock && v.Escapes[sysvirt.Clock] == 0 && v.Escapes[sysvirt.Sleep] == 0 && v.Escapes[sysvirt.Timer] == 0 && v.Escapes[sysvirt.Stall] == 0 && v.Unpatched == 0
		layerRandom = in.virtCfg.Random && v.Escapes[sysvirt.Random] == 0 && v.Escapes[sysvirt.Port] == 0 && v.Unpatched == 0
		if in.virtCfg.Clock {
			cat(ebpf.Clock).Shim += v.Served[sysvirt.Clock]
			cat(ebpf.Clock).Captured = layerClock
			cat(ebpf.Clock).Record = "env.json"
		}
		// The layer replaced or hid the kernel's vDSO: what it served is
		// counted instead.
		how := "the vDSO was hidden from %d program(s): their clock and getrandom calls entered the kernel, where dal's syscall layer served %d clock reads and %d getrandom calls (syscall_layer)"
		if in.virtCfg.Clock && in.virtCfg.Random && !in.virtCfg.NoVDSO {
			how = "dal's vDSO took the kernel's place in %d program(s): it and dal's syscall layer served %d clock reads and %d getrandom calls (syscall_layer; a Go runtime's monitor thread's reads are served, not counted)"
		}
		b.NotObservable = []string{fmt.Sprintf(how, v.Processes, v.Served[sysvirt.Clock], v.Served[sysvirt.Random])}
		if in.virtCfg.Random {
			cat(ebpf.Random).Shim += v.Served[sysvirt.Random]
			cat(ebpf.Random).Captured = layerRandom
			cat(ebpf.Random).Record = "env.json"
		}
		for _, k := range []sysvirt.Category{sysvirt.Clock, sysvirt.Sleep, sysvirt.Timer, sysvirt.Stall, sysvirt.Random, sysvirt.Port} {
			if n := v.Escapes[k]; n > 0 {
				c := string(ebpf.Clock)
				if k == sysvirt.Random || k == sysvirt.Port {
					c = string(ebpf.Random)
				}
				b.Escapes = append(b.Escapes, boundary.Escape{Category: c,
					Detail: fmt.Sprintf("%d %s call(s) got real values from the kernel: %s", n, k, strings.Join(v.Notes, "; "))})
			}
		}
		if v.Unpatched > 0 {
			b.Escapes = append(b.Escapes, boundary.Escape{Category: string(ebpf.Clock),
				Detail: fmt.Sprintf("%d program(s) kept their vDSO: %s", v.Unpatched, strings.Join(v.Notes, "; "))})
		}
	}
	// What the shims left real, by their own account.
	if in.clock != nil && in.mode != "default" {
		for _, s := range in.clock.Streams {
			names := make([]string, 0, len(s.Unserved))
			for name := range s.Unserved {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				c, api, ok := strings.Cut(name, "/")
				if ok && c == cpuClock {
					if b.Real == nil {
						b.Real = map[string]int64{}
					}
					b.Real[name] += s.Unserved[name]
					continue
				}
				if !ok || (c != string(ebpf.Clock) && c != string(ebpf.Random)) {
					continue
				}
				b.Escapes = append(b.Escapes, boundary.Escape{Category: c, Detail: fmt.Sprintf(
					"stream %s (%s) called %s %d time(s): the shim does not serve it, so it %s", s.Stream, s.Runtime, api, s.Unserved[name], unservedEffect(c))})
			}
		}
	}
	cat(ebpf.Filesystem).Captured, cat(ebpf.Filesystem).Record = true, "fs-diff/"
	cat(ebpf.Process).Captured, cat(ebpf.Process).Record = true, "env.json"
	if in.network != nil && in.network.Captured {
		cat(ebpf.Network).Captured, cat(ebpf.Network).Record = true, "network.har"
		cat(ebpf.Network).Shim = int64(in.exchanges)
		if n := in.network.OrderEscapes; n > 0 {
			cat(ebpf.Network).Captured = false
			b.Escapes = append(b.Escapes, boundary.Escape{Category: string(ebpf.Network), Detail: fmt.Sprintf(
				"%d response(s) reached the agent before its processes settled (a thread kept running past the stall limit): which of its concurrent requests was answered first was decided by latency", n)})
		}
	}
	if in.trace == nil || !in.trace.Tracing {
		b.Reason = "boundary tracing was not asked for"
		if in.trace != nil && in.trace.Reason != "" {
			b.Reason = in.trace.Reason
		}
		return b
	}
	b.Observed = true
	b.Syscalls = in.trace.Syscalls
	if in.virt != nil && len(in.virt.Calls) > 0 {
		// Calls the syscall layer answered never reached the syscall
		// entry the tracer counts at.
		if b.Syscalls == nil {
			b.Syscalls = map[string]uint64{}
		}
		for name, n := range in.virt.Calls {
			b.Syscalls[name] += uint64(n)
		}
	}
	if in.virt != nil {
		// And the calls it made processes run to map its vDSO, which
		// the programs never made.
		for name, n := range in.virt.Injected {
			if c, ok := b.Syscalls[name]; ok {
				b.Syscalls[name] = c - min(c, uint64(n))
			}
		}
	}
	for _, e := range in.trace.Events {
		b.Events = append(b.Events, boundary.Event{Kind: e.Kind, PID: e.PID, Detail: e.Detail})
	}
	b.DroppedEvents = in.trace.Drops
	for name, n := range in.trace.Syscalls {
		if c := ebpf.CategoryOf(name); c != "" {
			cat(c).Syscalls += n
		}
	}
	// Escapes: the notable crossings the bundle holds no record of.
	mirrored := map[string]bool{}
	if in.network != nil {
		mirrored[in.network.Proxy] = true
		for _, a := range in.network.Mirrored {
			mirrored[a] = true
		}
	}
	var execs []wire.TraceEvent
	for _, e := range in.trace.Events {
		switch e.Kind {
		case "random_device":
			if in.virtCfg.Random && in.virt != nil {
				continue // a FIFO of the seed's bytes in the sandbox
			}
			b.Escapes = append(b.Escapes, boundary.Escape{Category: string(ebpf.Random), PID: e.PID,
				Detail: fmt.Sprintf("read %s directly: its bytes are neither seeded nor logged", e.Detail)})
		case "connect", "sendto":
			if ours(e.Detail, in, mirrored) {
				continue
			}
			detail := fmt.Sprintf("connected to %s around dal's proxy", e.Detail)
			if strings.HasPrefix(e.Detail, "unix:") {
				detail = fmt.Sprintf("connected or tried to connect to %s, a Unix socket outside the sandbox's private directories (the host's sockets bound before the run are masked)", e.Detail)
			} else if in.network != nil && in.network.Captured {
				detail = fmt.Sprintf("tried to reach (blocked: no route out of the sandbox) %s around dal's proxy", e.Detail)
			}
			b.Escapes = append(b.Escapes, boundary.Escape{Category: string(ebpf.Network), PID: e.PID, Detail: detail})
		case "exec":
			execs = append(execs, e)
		}
	}
	// Every exec'd process should have said hello to dald through a shim.
	// Without the syscall layer, those that did not may have read clocks
	// or randomness through the kernel's vDSO, which no syscall hook sees:
	// listed, not counted as escapes. Under the layer every process is
	// served, and what escaped it is listed above.
	if unshimmed := len(execs) - streams; unshimmed > 0 && in.mode != "default" && in.virt == nil {
		var names []string
		for _, e := range execs {
			base := filepath.Base(e.Detail)
			if !strings.HasPrefix(base, "python") && base != "node" {
				names = append(names, e.Detail)
			}
		}
		sort.Strings(names)
		b.Unshimmed = unshimmed
		b.UnshimmedFiles = dedupe(names)
		b.NotObservable = append(b.NotObservable, fmt.Sprintf(
			"%d process(es) ran without a dal shim (see unshimmed_files): clock or random reads they made through the vDSO are invisible and not captured", unshimmed))
	}
	cat(ebpf.Clock).Touched = cat(ebpf.Clock).Shim > 0 || cat(ebpf.Clock).Syscalls > 0
	cat(ebpf.Random).Touched = cat(ebpf.Random).Shim > 0 || cat(ebpf.Random).Syscalls > 0
	cat(ebpf.Network).Touched = in.exchanges > 0
	cat(ebpf.Filesystem).Touched = cat(ebpf.Filesystem).Syscalls > 0
	cat(ebpf.Process).Touched = cat(ebpf.Process).Syscalls > 0 || len(execs) > 0
	for _, e := range b.Escapes {
		c := b.Categories[e.Category]
		c.Touched, c.Captured = true, false
	}
	touched, captured := 0, 0
	for _, c := range b.Categories {
		if c.Touched {
			touched++
			if c.Captured {
				captured++
			}
		}
	}
	cov := 1.0
	if touched > 0 {
		cov = float64(captured) / float64(touched)
	}
	b.Coverage = &cov
	return b
}

// ours reports whether a connection destination is dal's own or the
// sandbox's: dal's socket, its proxy, a mirrored loopback service, or a
// Unix socket in a directory private to the sandbox or in the workspace
// (whose overlay refuses connects to the host's sockets), which only the
// agent can have bound.
func ours(dest string, in boundaryInput, mirrored map[string]bool) bool {
	u, ok := strings.CutPrefix(dest, "unix:")
	if !ok {
		return mirrored[dest]
	}
	if in.daldSocket != "" && u == in.daldSocket {
		return true
	}
	if !filepath.IsAbs(u) {
		return false
	}
	u = filepath.Clean(u)
	return (in.privateTmp && sandbox.UnderPrivateDir(u)) ||
		(in.workspace != "" && (u == in.workspace || strings.HasPrefix(u, in.workspace+"/")))
}

// cpuClock is the reason the shims give for the CPU-time clocks and
// resource usage they leave real ("cpu_clock/time.process_time"), as the
// syscall layer counts them for other programs (sysvirt.Counts.Real).
const cpuClock = "cpu_clock"

func unservedEffect(category string) string {
	if category == string(ebpf.Random) {
		return "drew real randomness, neither seeded nor logged"
	}
	return "read the real clock, neither virtual nor logged"
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// reportBoundary tells the user what was not captured.
func reportBoundary(log io.Writer, b *boundary.Boundary) {
	if !b.Observed {
		fmt.Fprintf(log, "dal: boundary coverage not measured: %s\n", b.Reason)
		return
	}
	for _, e := range b.Escapes {
		fmt.Fprintf(log, "dal: escape (%s): %s\n", e.Category, e.Detail)
	}
	if b.DroppedEvents > 0 {
		fmt.Fprintf(log, "dal: %d boundary events were lost (ring buffer full): the escape list may be incomplete\n", b.DroppedEvents)
	}
	if len(b.Escapes) > 0 {
		fmt.Fprintf(log, "dal: boundary coverage %.2f (syscalls.json lists what escaped)\n", *b.Coverage)
	}
}

// syscallLayer is syscalls.json's form of what the syscall layer counted.
func syscallLayer(v *sysvirt.Counts) *boundary.SyscallLayer {
	conv := func(m map[sysvirt.Category]int64) map[boundary.LayerCategory]int64 {
		if m == nil {
			return nil
		}
		out := make(map[boundary.LayerCategory]int64, len(m))
		for k, n := range m {
			out[boundary.LayerCategory(k)] = n
		}
		return out
	}
	var real map[boundary.LayerReason]int64
	if v.Real != nil {
		real = make(map[boundary.LayerReason]int64, len(v.Real))
		for k, n := range v.Real {
			real[boundary.LayerReason(k)] = n
		}
	}
	return &boundary.SyscallLayer{Processes: v.Processes, Unpatched: v.Unpatched, Served: conv(v.Served), Real: real,
		Escapes: conv(v.Escapes), Calls: v.Calls, Injected: v.Injected, Notes: v.Notes}
}
