package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dal-runtime/dal/internal/wire"
)

// openWithSocket opens a session on srv's own socket and returns its id,
// token and socket.
func openWithSocket(t *testing.T, srv *Server) (id, token, sock string, ex *wire.Client) {
	t.Helper()
	ex, _, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleExec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	rep, err := ex.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Socket == "" || filepath.Dir(rep.Socket) != filepath.Dir(srv.Path()) {
		t.Fatalf("session.open returned the socket %q, want one beside %s", rep.Socket, srv.Path())
	}
	fi, err := os.Lstat(rep.Socket)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the session's socket %s: %v %v, want a socket of mode 0600", rep.Socket, fi, err)
	}
	return rep.Session, rep.Token, rep.Socket, ex
}

// TestSessionSocketConfinesAgents (issue 38): a connection on a session's
// own socket, the only one its agent sees, can be that session's process
// and nothing else. Many peers at once try to open sessions there, join
// the other session, or hello without the token: all are refused, no
// session is opened, and dald's socket keeps its sessions apart.
func TestSessionSocketConfinesAgents(t *testing.T) {
	srv := start(t)
	a, tokA, sockA, exA := openWithSocket(t, srv)
	b, tokB, sockB, _ := openWithSocket(t, srv)
	if sockA == sockB {
		t.Fatal("two sessions share a socket")
	}
	attempts := []struct {
		name  string
		hello wire.Request
		want  string
	}{
		{"exec", wire.Request{Role: wire.RoleExec}, "this socket is session " + a + "'s, for its processes only"},
		{"ctl", wire.Request{Role: wire.RoleCtl}, "this socket is session " + a + "'s"},
		{"other session", wire.Request{Role: wire.RoleShim, Session: b, Token: tokB}, "this socket is session " + a + "'s"},
		{"no token", wire.Request{Role: wire.RoleShim, Session: a}, "session token is missing"},
		{"wrong token", wire.Request{Role: wire.RoleShim, Session: a, Token: tokB}, "session token is wrong"},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 16*len(attempts))
	for range 16 {
		for _, at := range attempts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, _, err := wire.Dial(sockA, at.hello)
				if err == nil {
					// Refused or not, a client that got in tries to open a
					// session.
					_, oerr := c.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"})
					c.Close()
					errs <- fmt.Sprintf("%s: hello accepted (session.open: %v)", at.name, oerr)
					return
				}
				if !errors.Is(err, wire.ErrRemote) || !strings.Contains(err.Error(), at.want) {
					errs <- fmt.Sprintf("%s: %v, want %q", at.name, err, at.want)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	srv.mu.Lock()
	n := len(srv.sessions)
	srv.mu.Unlock()
	if n != 2 {
		t.Errorf("dald holds %d sessions, want the 2 the test opened", n)
	}

	// The session's process works, and sees its own session only.
	c, rep, err := wire.Dial(sockA, wire.Request{Role: wire.RoleShim, Session: a, Token: tokA, Stream: "0", Runtime: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rep.Stream != "0" || rep.Mode != "strict" {
		t.Errorf("hello: %+v", rep)
	}
	if _, err := c.Call(wire.Request{Op: wire.OpTicksPut, Session: a, Stream: "0", Kinds: []byte{0}, Values: wire.Int64s{5}}); err != nil {
		t.Errorf("ticks.put: %v", err)
	}
	if _, err := c.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"}); err == nil {
		t.Error("a shim on the session's socket opened a session")
	}
	st, err := c.Call(wire.Request{Op: wire.OpStatus})
	if err != nil || len(st.Sessions) != 1 || st.Sessions[0].ID != a {
		t.Errorf("status on the session's socket: %+v %v, want session %s only", st.Sessions, err, a)
	}
	// B's own socket serves B.
	cb, _, err := wire.Dial(sockB, wire.Request{Role: wire.RoleShim, Session: b, Token: tokB, Runtime: "test"})
	if err != nil {
		t.Fatalf("B's process on B's socket: %v", err)
	}
	cb.Close()

	// When A ends, its socket goes and its connections close.
	exA.Close()
	for {
		if _, err := os.Lstat(sockA); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if _, err := c.Call(wire.Request{Op: wire.OpTicksPut, Session: a, Stream: "0", Kinds: []byte{0}, Values: wire.Int64s{6}}); err == nil {
		t.Error("A's process connection outlived A")
	}
	if _, err := net.Dial("unix", sockA); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("dial A's socket after A ended: %v, want ENOENT", err)
	}
}

// TestSessionSocketLimits: one session's processes, many at once, hold at
// most --max-session-conns connections and --max-ticks ticks in all; dald's
// own socket still has every --max-conns slot for the next dal-exec.
func TestSessionSocketLimits(t *testing.T) {
	srv := startWith(t, Limits{Conns: 2, SessionConns: 4, Ticks: 1000})
	a, tokA, sockA, _ := openWithSocket(t, srv)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		held     []*wire.Client
		refusals []string
	)
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _, err := wire.Dial(sockA, wire.Request{Role: wire.RoleShim, Session: a, Token: tokA, Runtime: "test"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refusals = append(refusals, err.Error())
				return
			}
			held = append(held, c)
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	if len(held) != 4 || len(refusals) != 8 {
		t.Fatalf("%d connections held, %d refused; want 4 and 8", len(held), len(refusals))
	}
	for _, r := range refusals {
		if !strings.Contains(r, "already hold 4 connections to dald (limit 4, dald --max-session-conns)") {
			t.Errorf("refusal %q does not name the limit", r)
		}
	}
	// dald's own socket: the session's connections took none of its slots.
	if _, id := execClient(t, srv); id == "" {
		t.Fatal("no session")
	}

	// The held connections push ticks at once: the session holds 1000.
	var accepted sync.Map
	for i, c := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := c.Call(wire.Request{Op: wire.OpStatus})
			_ = st
			n := 0
			for {
				if _, err := c.Call(wire.Request{Op: wire.OpTicksPut, Session: a, Kinds: make([]byte, 50), Values: make(wire.Int64s, 50)}); err != nil {
					if !strings.Contains(err.Error(), "dald --max-ticks") {
						t.Errorf("connection %d: %v", i, err)
					}
					break
				}
				n += 50
			}
			accepted.Store(i, n)
		}()
	}
	wg.Wait()
	total := 0
	accepted.Range(func(_, v any) bool { total += v.(int); return true })
	if total != 1000 {
		t.Errorf("the session's processes stored %d ticks, want the limit, 1000", total)
	}
}
