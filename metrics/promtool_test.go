package metrics

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/promtest"
)

// promtoolCheck runs promtool check metrics, Prometheus' own linter, over
// an exposition.
func promtoolCheck(t *testing.T, exposition []byte) {
	t.Helper()
	cmd := exec.Command(promtest.Tool(t, "promtool"), "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestPromtoolHTTP(t *testing.T) {
	t.Parallel()
	m := New(Options{GoCollector: true, ProcessCollector: true, BPFStats: sampleBPF})
	exercise(t, m)
	s := serve(t, m)
	resp, body := get(t, "http://"+s.Addr()+"/metrics", "")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("Content-Type %q, want the text format", resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(body, "\ngo_goroutines ") || !strings.Contains(body, "\nprocess_open_fds ") {
		t.Fatal("the exposition lacks the Go or process collector, which promtool should see too")
	}
	promtoolCheck(t, []byte(body))
}

func TestPromtoolTextfile(t *testing.T) {
	t.Parallel()
	m := New(Options{BPFStats: sampleBPF})
	exercise(t, m)
	path := filepath.Join(t.TempDir(), "dal.prom")
	if err := m.WriteTextfile(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	promtoolCheck(t, data)
}
