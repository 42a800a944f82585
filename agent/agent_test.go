package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/daemon"
	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/seedrng"
)

var execConn *wire.Client
var sessionID string

// TestMain opens a strict session (seed 7) on an in-process dald and points
// the package at it, as dal-exec would.
func TestMain(m *testing.M) {
	switch os.Getenv("AGENT_TEST_PROBE") {
	case "1":
		// A child of TestTokenIsRequired: which stream did it get?
		fmt.Printf("stream %q\n", Stream())
		os.Exit(0)
	case "timers":
		timersProbe() // timer_test.go
		os.Exit(0)
	}
	dir, _ := os.MkdirTemp("", "agent-test-")
	srv, err := daemon.Listen(filepath.Join(dir, "dald.sock"), daemon.Options{})
	if err != nil {
		panic(err)
	}
	execConn, _, err = wire.Dial(srv.Path(), wire.Request{Role: wire.RoleExec})
	if err != nil {
		panic(err)
	}
	rep, err := execConn.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict", Seed: 7, EpochNS: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), QuantumNS: 1000})
	if err != nil {
		panic(err)
	}
	sessionID = rep.Session
	os.Setenv("DAL_SOCKET", srv.Path())
	os.Setenv("DAL_SESSION", rep.Session)
	os.Setenv("DAL_SESSION_TOKEN", rep.Token)
	os.Setenv("DAL_STREAM", "0")
	code := m.Run()
	Close()
	execConn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	srv.Shutdown(ctx)
	cancel()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestStrictClockAndRandomness(t *testing.T) {
	first := Now()
	if want := time.Date(2026, 1, 1, 0, 0, 0, 1000, time.UTC); !first.Equal(want) {
		t.Fatalf("first Now() = %v, want %v", first, want)
	}
	Sleep(5 * time.Second)
	if got := Since(first); got != 5*time.Second+time.Microsecond {
		t.Fatalf("after Sleep(5s), Since = %v", got)
	}
	want := seedrng.Derive(7, "0/go.reader").Bytes(16)
	got := make([]byte, 16)
	io.ReadFull(Reader, got)
	if string(got) != string(want) {
		t.Fatalf("Reader bytes %x, want %x", got, want)
	}
	if Stream() != "0" || Mode() != "strict" {
		t.Fatalf("stream %q mode %q", Stream(), Mode())
	}
	if Rand().Int63() == Rand().Int63() {
		t.Fatal("Rand does not advance a shared stream")
	}
}

func TestCommandReservesChildNames(t *testing.T) {
	a, b := Command("true"), Command("true")
	if envOf(a, "DAL_STREAM") != "0.1" || envOf(b, "DAL_STREAM") != "0.2" {
		t.Fatalf("children named %q, %q", envOf(a, "DAL_STREAM"), envOf(b, "DAL_STREAM"))
	}
}

func envOf(c interface{ Environ() []string }, k string) string {
	v := ""
	for _, kv := range c.Environ() {
		if len(kv) > len(k) && kv[:len(k)+1] == k+"=" {
			v = kv[len(k)+1:]
		}
	}
	return v
}

func TestReadPathMakesNoRoundTrip(t *testing.T) {
	before := CurrentStats()
	for range 1_000_000 {
		Now()
	}
	after := CurrentStats()
	if after.RoundTrips != before.RoundTrips || after.Reads-before.Reads != 1_000_000 {
		t.Fatalf("10^6 reads: %d round trips, %d reads counted", after.RoundTrips-before.RoundTrips, after.Reads-before.Reads)
	}
}

func TestCloseReports(t *testing.T) {
	Now()
	if err := Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := execConn.Call(wire.Request{Op: wire.OpSessionDump, Session: sessionID})
	if err != nil || len(rep.Streams) == 0 || !rep.Streams[0].Reported || rep.Streams[0].Reads == 0 {
		t.Fatalf("dump after Close: %+v %v", rep.Streams, err)
	}
}

// BenchmarkNowStrict is the Go client's clock read (target: at most 50 ns).
func BenchmarkNowStrict(b *testing.B) {
	get()
	for b.Loop() {
		Now()
	}
}

// BenchmarkTimeNow is the native baseline for BenchmarkNowStrict.
func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		time.Now()
	}
}

// TestTokenIsRequired: a process with the session's id but not its token is
// refused by dald and runs on real time, saying why; with the token it
// joins.
func TestTokenIsRequired(t *testing.T) {
	probe := func(token string) (string, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "AGENT_TEST_PROBE=1", "DAL_SESSION_TOKEN="+token)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("probe: %v %s", err, errb.String())
		}
		return out.String(), errb.String()
	}
	out, stderr := probe("")
	if out != "stream \"\"\n" || !strings.Contains(stderr, "dal: this Go process runs without virtual time") || !strings.Contains(stderr, "DAL_SESSION_TOKEN") {
		t.Fatalf("without the token: stdout %q stderr %q", out, stderr)
	}
	if out, stderr := probe(os.Getenv("DAL_SESSION_TOKEN")); !strings.HasPrefix(out, "stream \"0.") || stderr != "" {
		t.Fatalf("with the token: stdout %q stderr %q", out, stderr)
	}
}
