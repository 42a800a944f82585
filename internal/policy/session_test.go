package policy

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/policy/gate"
	"golang.org/x/sys/unix"
)

func askPolicy(t *testing.T) *Policy {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ask.rego")
	os.WriteFile(p, []byte("package dal\n\ndecision := {\"action\": \"ask\", \"reason\": \"pushing\"} if \"push\" in input.argv\n"), 0o644)
	pol, err := Load(context.Background(), p, Allow)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// openPTY returns a pty's near end and its far end (the "terminal").
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestAskOnTerminal: an ask is put at the terminal, and y there lets the
// call go on, recorded as the terminal's answer.
func TestAskOnTerminal(t *testing.T) {
	master, tty := openPTY(t)
	g, err := Start(askPolicy(t), Options{Terminal: tty, Dir: filepath.Join(t.TempDir(), "gate"), AskTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	type result struct {
		ok  bool
		rec Record
	}
	done := make(chan result)
	go func() {
		ok, rec := g.Check(context.Background(), Exec("/usr/bin/git", []string{"git", "push"}, "/w", "", false))
		done <- result{ok, rec}
	}()
	r := bufio.NewReader(master)
	var seen strings.Builder
	for !strings.Contains(seen.String(), "allow it? [y/N]") {
		b, err := r.ReadByte()
		if err != nil {
			t.Fatalf("%v after %q", err, seen.String())
		}
		seen.WriteByte(b)
	}
	if !strings.Contains(seen.String(), "git push (pushing)") {
		t.Fatalf("the question: %q", seen.String())
	}
	master.Write([]byte("y\n"))
	res := <-done
	if !res.ok || res.rec.Approval == nil || !strings.HasPrefix(res.rec.Approval.By, "terminal") || res.rec.Action != Ask {
		t.Fatalf("%+v", res)
	}
}

// TestAskDecidedElsewhere: an ask answered over the socket ends; Close
// denies what is still held.
func TestAskDecidedElsewhere(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gate")
	g, err := Start(askPolicy(t), Options{Dir: dir, AskTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Record, 2)
	for range 2 {
		go func() {
			_, rec := g.Check(context.Background(), Exec("/usr/bin/git", []string{"git", "push"}, "/w", "", false))
			done <- rec
		}()
	}
	var ids []string
	for len(ids) < 2 {
		ids = ids[:0]
		for _, l := range gate.List(context.Background(), dir) {
			for _, p := range l.Pending {
				ids = append(ids, p.ID)
			}
		}
	}
	if err := gate.Decide(context.Background(), dir, ids[0], true, "test", ""); err != nil {
		t.Fatal(err)
	}
	first := <-done
	if !first.Allowed || !strings.HasSuffix(first.Approval.By, "via test") {
		t.Fatalf("approved: %+v", first)
	}
	g.Close()
	second := <-done
	if second.Allowed || second.Approval.By != "cancellation" {
		t.Fatalf("held at close: %+v", second.Approval)
	}
}

// TestReadAudit: a bundle without policy.json (the bundle reader wraps
// ErrNotExist) has no audit; one whose policy file does not match its
// recorded SHA-256 is refused.
func TestReadAudit(t *testing.T) {
	missing := func(name string) ([]byte, error) { return nil, fmt.Errorf("bundle: %s: %w", name, fs.ErrNotExist) }
	if a, p, err := ReadAudit(context.Background(), missing); a != nil || p != nil || err != nil {
		t.Fatalf("no policy.json: %v %v %v", a, p, err)
	}
	dir := t.TempDir()
	g := newGate(load(t, "deny-git-push.rego"), Options{})
	g.Check(context.Background(), Exec("/usr/bin/git", []string{"git", "push"}, "/w", "", false))
	if err := WriteAudit(dir, g.Audit(), g.Policy()); err != nil {
		t.Fatal(err)
	}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, filepath.FromSlash(name))) }
	a, p, err := ReadAudit(context.Background(), read)
	if err != nil || len(a.Decisions) != 1 || a.Decisions[0].Action != Deny || p == nil {
		t.Fatalf("read back: %+v %v", a, err)
	}
	os.WriteFile(filepath.Join(dir, SourceDir, "deny-git-push.rego"), []byte("package dal\n\ndecision := {\"action\": \"allow\"}\n"), 0o644)
	if _, _, err := ReadAudit(context.Background(), read); err == nil || !strings.Contains(err.Error(), "does not match the SHA-256") {
		t.Fatalf("a changed policy file: %v", err)
	}
}
