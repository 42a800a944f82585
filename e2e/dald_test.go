package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/vclock"
)

// TestDaldSessionsAreIsolated is issue 12's attack 8 against the built
// binaries: while a victim runs under a shared dald, a client of the same
// user reads the victim's session id from status and tries to join it as a
// shim (to inject ticks, a runtime version, drift into its signed log) and
// to report figures. Each attempt is refused with a sentence, and the
// victim's clock log holds only what its own process wrote.
func TestDaldSessionsAreIsolated(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "dald.sock")
	d := exec.Command(bin.dald, "--socket", sock, "--metrics-addr", "127.0.0.1:0", "--no-trace")
	stderr, _ := d.StderrPipe()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Process.Kill(); d.Wait() })
	var metricsURL string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := regexp.MustCompile(`url=(http://\S+/metrics)`).FindStringSubmatch(sc.Text()); m != nil {
			metricsURL = m[1]
		}
		if strings.Contains(sc.Text(), "dald listening") {
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	if metricsURL == "" {
		t.Fatal("dald did not log its metrics address before listening")
	}

	clock := filepath.Join(t.TempDir(), "clock.json")
	victim := exec.Command(bin.exec, "run", "--socket", sock, "--mode", "seeded", "--clock-out", clock, "--",
		"python3", "-c", "import sys, time; time.time(); sys.stdin.read(); time.time()")
	stdin, _ := victim.StdinPipe()
	var vout bytes.Buffer
	victim.Stdout, victim.Stderr = &vout, &vout
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill() })
	var id string
	waitFor(t, func() bool {
		ctl, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleCtl})
		if err != nil {
			return false
		}
		defer ctl.Close()
		st, err := ctl.Call(wire.Request{Op: wire.OpStatus})
		if err != nil || len(st.Sessions) != 1 || st.Sessions[0].Live != 1 {
			return false
		}
		id = st.Sessions[0].ID
		return true
	})

	// Join the victim's session: no token, a made-up one, another session's.
	ex, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleExec})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	own, err := ex.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "seeded"})
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"", strings.Repeat("a", 2*wire.TokenLen), own.Token} {
		_, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleShim, Session: id, Token: token, Stream: "0", Runtime: "python 9.9.9"})
		if err == nil || !strings.Contains(err.Error(), "session token is") || !strings.Contains(err.Error(), "DAL_SESSION_TOKEN") {
			t.Errorf("hello into the victim's session with token %q: %v", token, err)
		}
	}
	// Report figures for the victim's session, or for none.
	for _, req := range []wire.Request{
		{Op: wire.OpObserve, Session: id, What: "replay", Value: 1},
		{Op: wire.OpObserve, What: "replay", Value: 1},
	} {
		if _, err := ex.Call(req); err == nil || !strings.Contains(err.Error(), "not owned by this connection") {
			t.Errorf("observe naming session %q: %v", req.Session, err)
		}
	}
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\ndal_replays_exact_total 0\n") {
		t.Errorf("refused figures reached /metrics:\n%s", body)
	}

	stdin.Close()
	if err := victim.Wait(); err != nil {
		t.Fatalf("victim: %v\n%s", err, vout.String())
	}
	f, err := vclock.ReadFile(clock)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Streams) != 1 || !strings.HasPrefix(f.Streams[0].Runtime, "python 3") || len(f.Streams[0].Ticks.Values) < 2 || len(f.Drift) != 0 {
		t.Fatalf("the victim's clock log was touched: %+v drift %+v", f.Streams, f.Drift)
	}
}
