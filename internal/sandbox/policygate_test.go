package sandbox

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dal-runtime/dal/internal/seccompbpf"
	"golang.org/x/sys/unix"
)

// recordingGate is a PolicyGate that refuses execs whose argv holds
// "push" and connects to refuse, and lists every call it was asked.
type recordingGate struct {
	mu    sync.Mutex
	calls []PolicyCall
}

func (g *recordingGate) gate(refuse string, exempt ...string) *PolicyGate {
	return &PolicyGate{Exempt: exempt, Decide: func(c PolicyCall) bool {
		g.mu.Lock()
		g.calls = append(g.calls, c)
		g.mu.Unlock()
		return !slices.Contains(c.Argv, "push") && (c.Kind != "connect" || c.Addr != refuse)
	}}
}

func (g *recordingGate) execs() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out [][]string
	for _, c := range g.calls {
		if c.Kind == "exec" {
			out = append(out, c.Argv)
		}
	}
	return out
}

// TestPolicyGateExec: every exec of the agent's tree (the agent's own
// first) is asked, with argv and cwd; a refused one fails with EACCES
// and the agent goes on.
func TestPolicyGateExec(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, map[string]string{"sub/": ""})
	g := &recordingGate{}
	cfg.Policy = g.gate("")
	r := run(t, cfg, `cd sub && /bin/echo one two; /bin/echo push 2>/dev/null || echo "refused $?"; exec /bin/true`)
	if r.code != 0 || r.stdout != "one two\nrefused 126\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	got := g.execs()
	want := [][]string{{"/bin/sh", "-c"}, {"/bin/echo", "one", "two"}, {"/bin/echo", "push"}, {"/bin/true"}}
	if len(got) != len(want) {
		t.Fatalf("asked %q", got)
	}
	for i := range want {
		if !slices.Equal(got[i][:len(want[i])], want[i]) {
			t.Fatalf("exec %d: asked %q, want %q", i, got[i], want[i])
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.calls[1:] {
		if c.Cwd != cfg.Workspace+"/sub" || !strings.HasPrefix(c.Path, "/bin/") {
			t.Fatalf("call %+v: cwd or path wrong (workspace %s)", c, cfg.Workspace)
		}
	}
}

// TestPolicyGateConnect: a connect to a loopback address is asked, an
// exempt one is not; a refused one fails with ECONNREFUSED although a
// server listens there, an allowed one connects.
func TestPolicyGateConnect(t *testing.T) {
	t.Parallel()
	cfg := newConfig(t, nil)
	cfg.Network = true
	g := &recordingGate{}
	cfg.Policy = g.gate("127.0.0.1:9090", "127.0.0.1:7070")
	script := `
import socket
ls = []
for port in (7070, 8080, 9090):
    l = socket.socket(); l.bind(("127.0.0.1", port)); l.listen(); ls.append(l)
for port in (7070, 8080, 9090):
    c = socket.socket()
    try:
        c.connect(("127.0.0.1", port)); print(port, "connected")
    except OSError as e:
        print(port, e.strerror)
`
	cmd, err := Command(cfg, []string{"/usr/bin/python3", "-c", script}, []string{"PATH=/usr/bin:/bin"}, cfg.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var addrs []string
	for _, c := range g.calls {
		if c.Kind == "connect" {
			addrs = append(addrs, c.Addr)
		}
	}
	want := "7070 connected\n8080 connected\n9090 Connection refused\n"
	if !slices.Equal(addrs, []string{"127.0.0.1:8080", "127.0.0.1:9090"}) || out.String() != want {
		t.Fatalf("asked %q, output %q", addrs, out.String())
	}
}

// TestPolicyFilterCost: without a gate, the filter is the same program
// as before: no rule for execve.
func TestPolicyFilterCost(t *testing.T) {
	without := filter(filterFor{network: true, writes: true}, nil)
	with := filter(filterFor{network: true, policy: true, writes: true}, nil)
	has := func(f []unix.SockFilter, nr int) bool {
		for _, ins := range f {
			if ins.Code == seccompbpf.JeqK && ins.K == uint32(nr) {
				return true
			}
		}
		return false
	}
	if has(without, unix.SYS_EXECVE) || !has(with, unix.SYS_EXECVE) || !has(with, unix.SYS_EXECVEAT) {
		t.Fatalf("execve rules: without a gate %v, with one %v", has(without, unix.SYS_EXECVE), has(with, unix.SYS_EXECVE))
	}
	if len(with) <= len(without) {
		t.Fatalf("the gate adds no instruction: %d vs %d", len(with), len(without))
	}
}
