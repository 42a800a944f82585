package daemon

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dal-runtime/dal/internal/wire"
)

func start(t *testing.T) *Server {
	t.Helper()
	srv, err := Listen(filepath.Join(t.TempDir(), "dald.sock"), Options{MaxFrame: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv
}

// tokens holds the token of every session the tests opened, by id, as a
// shim would find it in DAL_SESSION_TOKEN.
var tokens sync.Map

func execClient(t *testing.T, srv *Server) (*wire.Client, string) {
	t.Helper()
	return execClientMode(t, srv, "strict")
}

func execClientMode(t *testing.T, srv *Server, mode string) (*wire.Client, string) {
	t.Helper()
	c, _, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleExec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rep, err := c.Call(wire.Request{Op: wire.OpSessionOpen, Mode: mode, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Token) != 2*wire.TokenLen {
		t.Fatalf("session token %q is not %d hex bytes", rep.Token, wire.TokenLen)
	}
	tokens.Store(rep.Session, rep.Token)
	return c, rep.Session
}

func tokenOf(id string) string {
	tok, _ := tokens.Load(id)
	s, _ := tok.(string)
	return s
}

func shim(t *testing.T, srv *Server, session, hint string) (*wire.Client, wire.Reply) {
	t.Helper()
	c, rep, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleShim, Session: session, Token: tokenOf(session), Stream: hint, Runtime: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rep
}

func TestHelloHandsOutConfigAndStreams(t *testing.T) {
	srv := start(t)
	_, id := execClient(t, srv)
	root, rep := shim(t, srv, id, "0")
	if rep.Stream != "0" || rep.Mode != "strict" || rep.Seed != 7 || rep.QuantumNS != 1000 ||
		rep.EpochNS != time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() || rep.Batch != DefaultBatch {
		t.Fatalf("hello reply %+v", rep)
	}
	// A patched spawn reserves names in spawn order ...
	a, _ := root.Call(wire.Request{Op: wire.OpSpawn, Session: id})
	b, _ := root.Call(wire.Request{Op: wire.OpSpawn, Session: id})
	if a.Child != "0.1" || b.Child != "0.2" {
		t.Fatalf("spawned %q, %q", a.Child, b.Child)
	}
	// ... and the children claim them even when they start in reverse.
	if _, r := shim(t, srv, id, "0.2"); r.Stream != "0.2" {
		t.Fatalf("reserved 0.2 granted as %q", r.Stream)
	}
	if _, r := shim(t, srv, id, "0.1"); r.Stream != "0.1" {
		t.Fatalf("reserved 0.1 granted as %q", r.Stream)
	}
	// Processes that inherited a claimed name through a shell become the
	// next children, in hello order.
	if _, r := shim(t, srv, id, "0"); r.Stream != "0.3" {
		t.Fatalf("inherited 0 granted as %q", r.Stream)
	}
	if _, r := shim(t, srv, id, "0.1"); r.Stream != "0.1.1" {
		t.Fatalf("inherited 0.1 granted as %q", r.Stream)
	}
}

func TestTicksRoundTripAndReplay(t *testing.T) {
	srv := start(t)
	ex, id := execClient(t, srv)
	if _, err := ex.Call(wire.Request{Op: wire.OpSessionLoad, Session: id, Stream: "0", Kinds: []byte{0, 1}, Values: []int64{5, 6}}); err != nil {
		t.Fatal(err)
	}
	c, _ := shim(t, srv, id, "0")
	if _, err := c.Call(wire.Request{Op: wire.OpTicksPut, Session: id, Stream: "0", Kinds: []byte{0, 0, 1}, Values: []int64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	f, err := c.Call(wire.Request{Op: wire.OpTicksFetch, Session: id, Stream: "0", From: 1, Max: 10})
	if err != nil || len(f.Values) != 1 || f.Values[0] != 6 || !f.End {
		t.Fatalf("fetch %+v %v", f, err)
	}
	c.Call(wire.Request{Op: wire.OpReport, Session: id, Reads: 3, Timers: [][2]int64{{100, 1}}})
	c.Call(wire.Request{Op: wire.OpDrift, Session: id, What: "clock", Detail: "read 3 is past the 2 recorded ticks"})
	d, err := ex.Call(wire.Request{Op: wire.OpSessionDump, Session: id})
	if err != nil || len(d.Streams) != 1 || d.Streams[0].Ticks != 3 || d.Streams[0].Reads != 3 || len(d.Drift) != 1 {
		t.Fatalf("dump %+v %v", d, err)
	}
	p, err := ex.Call(wire.Request{Op: wire.OpSessionTicks, Session: id, Stream: "0"})
	if err != nil || len(p.Values) != 3 || p.Kinds[2] != 1 {
		t.Fatalf("ticks page %+v %v", p, err)
	}
	// A shim may not write another stream's log.
	if _, err := c.Call(wire.Request{Op: wire.OpTicksPut, Session: id, Stream: "0.1", Kinds: []byte{0}, Values: []int64{1}}); err == nil {
		t.Fatal("put into another stream accepted")
	}
	if _, err := c.Call(wire.Request{Op: wire.OpTicksPut, Session: id, Kinds: []byte{9}, Values: []int64{1}}); err == nil {
		t.Fatal("unknown tick kind accepted")
	}
}

// raw sends bytes on a fresh connection and returns the reply frame, if any.
func raw(t *testing.T, srv *Server, payload []byte) (wire.Reply, error) {
	t.Helper()
	c, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(payload); err != nil {
		return wire.Reply{}, err
	}
	body, err := wire.ReadFrame(bufio.NewReader(c), wire.DefaultMaxFrame)
	if err != nil {
		return wire.Reply{}, err
	}
	rep, err := wire.DecodeReply(body)
	if err != nil {
		return rep, err
	}
	// The server closes the connection after an error.
	if _, err := c.Read(make([]byte, 1)); err == nil {
		return rep, errors.New("connection stayed open after a fatal error")
	}
	return rep, nil
}

func frame(body []byte) []byte { return wire.AppendFrame(nil, body) }

func TestBadClientsGetClearErrorsAndOthersCarryOn(t *testing.T) {
	srv := start(t)
	_, id := execClient(t, srv)
	good, _ := shim(t, srv, id, "0")
	hello, _ := wire.Encode(&wire.Request{Op: "hello", Proto: 1, Role: "ctl"})
	oversized := make([]byte, 4)
	binary.BigEndian.PutUint32(oversized, 1<<30)
	wrongProto, _ := wire.Encode(&wire.Request{Op: "hello", Proto: 99, Role: "ctl"})
	notHello, _ := wire.Encode(&wire.Request{Op: "status"})
	cases := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "limit"},
		{"not a map", frame([]byte{0x93, 1, 2, 3}), "not a msgpack map"},
		{"truncated msgpack", frame([]byte{0x82, 0xa2, 'o', 'p'}), "malformed request"},
		{"oversized", oversized, "limit 65536"},
		{"zero length", []byte{0, 0, 0, 0}, "frame of 0 bytes"},
		{"other protocol", frame(wrongProto), "speaks protocol 1"},
		{"no hello", frame(notHello), "first request must be hello"},
		{"unknown role", frame(mustEncode(wire.Request{Op: "hello", Proto: 1, Role: "root"})), "unknown role"},
		{"unknown session", frame(mustEncode(wire.Request{Op: "hello", Proto: 1, Role: "shim", Session: "nope"})), "is not open"},
		{"no token", frame(mustEncode(wire.Request{Op: "hello", Proto: 1, Role: "shim", Session: id, Stream: "0.9"})), "token is missing"},
		{"bad stream", frame(mustEncode(wire.Request{Op: "hello", Proto: 1, Role: "shim", Session: id, Token: tokenOf(id), Stream: "7.1"})), "does not start at the root"},
		{"long stream", frame(mustEncode(wire.Request{Op: "hello", Proto: 1, Role: "shim", Session: id, Token: tokenOf(id), Stream: "0" + strings.Repeat(".1", 200)})), "at most 256 bytes"},
		{"oversized hello", frame(mustEncode(wire.Request{Op: "hello", Proto: 1, Role: "ctl", Detail: strings.Repeat("x", 70000)})), "limit 65536"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := raw(t, srv, tc.payload)
			if err != nil {
				t.Fatalf("no clear error reply: %v", err)
			}
			if rep.OK || !strings.Contains(rep.Err, tc.want) {
				t.Fatalf("reply %+v, want an error containing %q", rep, tc.want)
			}
		})
	}
	// A half frame followed by a disconnect.
	c, _ := net.Dial("unix", srv.Path())
	c.Write(frame(hello)[:3])
	c.Close()
	c, _ = net.Dial("unix", srv.Path())
	c.Write(frame(hello)[:10])
	c.Close()
	// The good session never noticed.
	if _, err := good.Call(wire.Request{Op: wire.OpTicksPut, Session: id, Kinds: []byte{0}, Values: []int64{1}}); err != nil {
		t.Fatalf("good client broken by bad ones: %v", err)
	}
	if r, err := good.Call(wire.Request{Op: "frobnicate", Session: id}); err == nil || !strings.Contains(r.Err, "unknown op") {
		t.Fatalf("unknown op: %+v %v", r, err)
	}
	// An unknown op is not fatal: the connection still works.
	if _, err := good.Call(wire.Request{Op: wire.OpStatus}); err != nil {
		t.Fatal(err)
	}
}

func mustEncode(r wire.Request) []byte {
	b, err := wire.Encode(&r)
	if err != nil {
		panic(err)
	}
	return b
}

func TestTwoHundredConcurrentSessions(t *testing.T) {
	srv := start(t)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- session200(srv.Path(), uint64(i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st, _, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleCtl})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := st.Call(wire.Request{Op: wire.OpStatus})
	if err != nil || len(rep.Sessions) != 0 {
		t.Fatalf("after all sessions closed status shows %d sessions (%v)", len(rep.Sessions), err)
	}
}

func session200(path string, seed uint64) error {
	ex, _, err := wire.Dial(path, wire.Request{Role: wire.RoleExec})
	if err != nil {
		return err
	}
	defer ex.Close()
	rep, err := ex.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "seeded", Seed: seed})
	if err != nil {
		return err
	}
	sh, hello, err := wire.Dial(path, wire.Request{Role: wire.RoleShim, Session: rep.Session, Token: rep.Token, Stream: "0"})
	if err != nil {
		return err
	}
	defer sh.Close()
	if hello.Seed != seed || hello.Stream != "0" {
		return fmt.Errorf("session %d got seed %d stream %q", seed, hello.Seed, hello.Stream)
	}
	for i := range 10 {
		if _, err := sh.Call(wire.Request{Op: wire.OpTicksPut, Session: rep.Session, Kinds: []byte{0}, Values: []int64{int64(seed)*100 + int64(i)}}); err != nil {
			return err
		}
	}
	d, err := ex.Call(wire.Request{Op: wire.OpSessionTicks, Session: rep.Session, Stream: "0"})
	if err != nil {
		return err
	}
	if len(d.Values) != 10 || d.Values[9] != int64(seed)*100+9 {
		return fmt.Errorf("session %d read back %v", seed, d.Values)
	}
	_, err = ex.Call(wire.Request{Op: wire.OpSessionClose, Session: rep.Session})
	return err
}

func TestStaleSocketIsReplacedLiveOneIsNot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dald.sock")
	// A stale socket: bound, then its owner went away without unlinking.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	srv, err := Listen(path, Options{})
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := Listen(path, Options{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second daemon on a live socket: %v", err)
	}
	srv.Shutdown(context.Background())
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("socket left behind after shutdown")
	}
	os.WriteFile(path, []byte("not a socket"), 0o600)
	if _, err := Listen(path, Options{}); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Fatalf("regular file at socket path: %v", err)
	}
}

func TestUnwritableSocketPath(t *testing.T) {
	_, err := Listen("/proc/dald.sock", Options{})
	if err == nil || !strings.Contains(err.Error(), "pick a --socket path") {
		t.Fatalf("unwritable path: %v", err)
	}
}

func TestShutdownDrainsClients(t *testing.T) {
	srv := start(t)
	ex, id := execClient(t, srv)
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	// Still serving the connected client while draining ...
	time.Sleep(20 * time.Millisecond)
	if _, err := ex.Call(wire.Request{Op: wire.OpSessionDump, Session: id}); err != nil {
		t.Fatalf("client cut off during drain: %v", err)
	}
	select {
	case <-done:
		t.Fatal("shutdown returned with a client connected")
	default:
	}
	// ... and not accepting new ones.
	if _, err := net.Dial("unix", srv.Path()); err == nil {
		t.Fatal("accepted a connection while draining")
	}
	ex.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestShutdownDeadlineCutsOff(t *testing.T) {
	srv := start(t)
	execClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown with a lingering client: %v", err)
	}
}
