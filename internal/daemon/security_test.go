package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/dal-runtime/dal/internal/wire"
	"github.com/dal-runtime/dal/metrics"
)

// TestMain doubles as the helper processes of TestStatusShowsOnlyOwnSessions:
// a dald serving as another user, and a client of that user.
func TestMain(m *testing.M) {
	switch {
	case os.Getenv("DAEMON_TEST_SERVE") != "":
		os.Exit(helperServe(os.Getenv("DAEMON_TEST_SERVE")))
	case os.Getenv("DAEMON_TEST_CLIENT") != "":
		os.Exit(helperClient(os.Getenv("DAEMON_TEST_CLIENT")))
	}
	os.Exit(m.Run())
}

// helperServe serves at sock until stdin closes.
func helperServe(sock string) int {
	srv, err := Listen(sock, Options{})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	srv.Shutdown(context.Background())
	return 0
}

// helperClient opens a session at sock, prints its id and the ids status
// lists, and holds the session until stdin closes.
func helperClient(sock string) int {
	fail := func(err error) int { fmt.Println("error:", err); return 1 }
	ex, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleExec})
	if err != nil {
		return fail(err)
	}
	open, err := ex.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"})
	if err != nil {
		return fail(err)
	}
	st, err := ex.Call(wire.Request{Op: wire.OpStatus})
	if err != nil {
		return fail(err)
	}
	ids := []string{}
	for _, s := range st.Sessions {
		ids = append(ids, s.ID)
	}
	b, _ := json.Marshal(map[string]any{"own": open.Session, "listed": ids, "socket": open.Socket})
	fmt.Println(string(b))
	io.Copy(io.Discard, os.Stdin)
	return 0
}

func TestForgedHelloIsRefused(t *testing.T) {
	srv := start(t)
	_, victim := execClient(t, srv)
	_, mine := execClient(t, srv)
	cases := []struct {
		name, token, want string
	}{
		{"no token", "", "session token is missing"},
		{"own session's token", tokenOf(mine), "session token is wrong"},
		{"right length, wrong bytes", strings.Repeat("0", 2*wire.TokenLen), "session token is wrong"},
		{"token prefix", tokenOf(victim)[:2*wire.TokenLen-1], "session token is wrong"},
		{"token and more", tokenOf(victim) + "0", "session token is wrong"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := raw(t, srv, frame(mustEncode(wire.Request{Op: wire.OpHello, ID: 1, Proto: wire.Proto,
				Role: wire.RoleShim, Session: victim, Token: tc.token, Stream: "0", Runtime: "forged"})))
			if err != nil {
				t.Fatalf("no clear error, or the connection stayed open: %v", err)
			}
			if rep.OK || rep.ID != 1 || !strings.Contains(rep.Err, tc.want) || !strings.Contains(rep.Err, wire.EnvToken) {
				t.Fatalf("reply %+v, want an error containing %q and naming %s", rep, tc.want, wire.EnvToken)
			}
		})
	}
	// The victim's session never saw the forger: its stream 0 is free.
	if _, r := shim(t, srv, victim, "0"); r.Stream != "0" {
		t.Fatalf("victim's root stream granted as %q after forged hellos", r.Stream)
	}
}

// TestNothingReachesAnotherSession: a shim of one session, holding its own
// token, cannot put ticks, draws, reports (runtime versions, counters) or
// drift into another session, which dal-exec would sign into its bundle.
func TestNothingReachesAnotherSession(t *testing.T) {
	srv := start(t)
	vex, victim := execClientMode(t, srv, "logged")
	_, mine := execClientMode(t, srv, "logged")
	shim(t, srv, victim, "0")
	attacker, _ := shim(t, srv, mine, "0")
	for _, req := range []wire.Request{
		{Op: wire.OpTicksPut, Kinds: []byte{0}, Values: []int64{42}},
		{Op: wire.OpDrawsPut, Label: "os.urandom", Data: []byte("forged")},
		{Op: wire.OpReport, Reads: 1 << 40, Draws: map[string]int64{"os.urandom": 6}},
		{Op: wire.OpDrift, What: "clock", Detail: "forged"},
		{Op: wire.OpSpawn},
		{Op: wire.OpHello, Proto: wire.Proto, Role: wire.RoleShim, Token: tokenOf(victim), Runtime: "forged"},
	} {
		req.Session = victim
		if _, err := attacker.Call(req); err == nil {
			t.Errorf("%s naming the victim's session was accepted", req.Op)
		}
	}
	// Nor through the session's owner ops, which belong to its dal-exec.
	for _, op := range []string{wire.OpSessionLoad, wire.OpSessionDump, wire.OpSessionClose, wire.OpTraceStart, wire.OpObserve} {
		other, _ := execClient(t, srv)
		if _, err := other.Call(wire.Request{Op: op, Session: victim, Stream: "0", Kinds: []byte{0}, Values: []int64{1}, What: "replay"}); err == nil ||
			!strings.Contains(err.Error(), "not owned by this connection") {
			t.Errorf("%s on another dal-exec's session: %v", op, err)
		}
	}
	d, err := vex.Call(wire.Request{Op: wire.OpSessionDump, Session: victim})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Streams) != 1 || d.Streams[0].Runtime != "test" || d.Streams[0].Ticks != 0 || d.Streams[0].Reported || len(d.Streams[0].Draws) != 0 || len(d.Drift) != 0 {
		t.Fatalf("victim's session was touched: %+v drift %+v", d.Streams, d.Drift)
	}
}

func TestObserveTakesOnlyTheOwnersFiguresOnce(t *testing.T) {
	m := metrics.New(metrics.Options{})
	srv, err := Listen(filepath.Join(t.TempDir(), "dald.sock"), Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	count := func() float64 {
		mfs, err := m.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "dal_replays_exact_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}

	// Without a session of its own, a client reports nothing.
	bare, _, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleExec})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.Call(wire.Request{Op: wire.OpObserve, What: "replay", Value: 1}); err == nil {
		t.Fatal("observe without a session accepted")
	}
	// Through another's session id: refused.
	_, victim := execClient(t, srv)
	if _, err := bare.Call(wire.Request{Op: wire.OpObserve, Session: victim, What: "replay", Value: 1}); err == nil {
		t.Fatal("observe naming another connection's session accepted")
	}
	// A shim of a session, holding its token, cannot report either.
	sh, _ := shim(t, srv, victim, "0")
	if _, err := sh.Call(wire.Request{Op: wire.OpObserve, Session: victim, What: "replay", Value: 1}); err == nil {
		t.Fatal("observe from a shim accepted")
	}
	if got := count(); got != 0 {
		t.Fatalf("refused figures counted: dal_replays_exact_total %v", got)
	}
	// The owner of a figures session reports each figure once.
	fig, err := bare.Call(wire.Request{Op: wire.OpSessionOpen, Figures: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Call(wire.Request{Op: wire.OpObserve, Session: fig.Session, What: "replay", Value: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Call(wire.Request{Op: wire.OpObserve, Session: fig.Session, What: "replay", Value: 1}); err == nil ||
		!strings.Contains(err.Error(), "reports each figure once") {
		t.Fatalf("a second replay figure from one session: %v", err)
	}
	if got := count(); got != 1 {
		t.Fatalf("dal_replays_exact_total %v, want 1", got)
	}
	// No process joins a figures session, token or not.
	if _, _, err := wire.Dial(srv.Path(), wire.Request{Role: wire.RoleShim, Session: fig.Session, Token: fig.Token}); err == nil ||
		!strings.Contains(err.Error(), "only reports figures") {
		t.Fatalf("hello into a figures session: %v", err)
	}
}

// TestStatusShowsOnlyOwnSessions runs dald as nobody; root and nobody each
// open a session; nobody's status lists only its own, root's lists both.
func TestStatusShowsOnlyOwnSessions(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "daemon-uid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "daemon.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "dald.sock")
	nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	helper := func(env string) (*exec.Cmd, *bufio.Scanner, io.WriteCloser) {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), env+"="+sock)
		cmd.SysProcAttr = nobody
		cmd.Stderr = os.Stderr
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { in.Close(); cmd.Wait() })
		sc := bufio.NewScanner(out)
		if !sc.Scan() {
			t.Fatalf("%s helper printed nothing", env)
		}
		return cmd, sc, in
	}
	_, sc, _ := helper("DAEMON_TEST_SERVE")
	if sc.Text() != "ready" {
		t.Fatalf("dald as nobody: %s", sc.Text())
	}
	root, _, err := wire.Dial(sock, wire.Request{Role: wire.RoleExec})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	mine, err := root.Call(wire.Request{Op: wire.OpSessionOpen, Mode: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	// The session's own socket is dald's user's. Root opened it, and
	// root's agent runs without capabilities: it is open to all (the
	// peer check still admits dald's user and root alone), in a directory
	// anyone may search; dald's own (0700) is not, so a private one.
	var st0, dst syscall.Stat_t
	if err := syscall.Lstat(mine.Socket, &st0); err != nil || st0.Uid != 65534 || st0.Mode&0o777 != 0o666 || filepath.Dir(mine.Socket) == dir {
		t.Errorf("the session's socket %q: uid %d mode %o (%v), want nobody's, 0666, not in dald's 0700 directory", mine.Socket, st0.Uid, st0.Mode&0o777, err)
	}
	if err := syscall.Stat(filepath.Dir(mine.Socket), &dst); err != nil || dst.Mode&0o777 != 0o711 {
		t.Errorf("the session socket's directory: mode %o (%v), want 0711", dst.Mode&0o777, err)
	}
	_, sc, clientIn := helper("DAEMON_TEST_CLIENT")
	var seen struct {
		Own    string   `json:"own"`
		Listed []string `json:"listed"`
		Socket string   `json:"socket"`
	}
	if err := json.Unmarshal([]byte(sc.Text()), &seen); err != nil {
		t.Fatalf("client as nobody: %s", sc.Text())
	}
	// nobody's own session: its socket private, beside dald's.
	if err := syscall.Lstat(seen.Socket, &st0); err != nil || st0.Mode&0o777 != 0o600 || filepath.Dir(seen.Socket) != dir {
		t.Errorf("nobody's session socket %q: mode %o (%v), want 0600 beside dald's", seen.Socket, st0.Mode&0o777, err)
	}
	if !slices.Equal(seen.Listed, []string{seen.Own}) {
		t.Errorf("nobody's status lists %v, want only its own session %s (root's is %s)", seen.Listed, seen.Own, mine.Session)
	}
	st, err := root.Call(wire.Request{Op: wire.OpStatus})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range st.Sessions {
		ids = append(ids, s.ID)
	}
	want := []string{mine.Session, seen.Own}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("root's status lists %v, want both sessions %v", ids, want)
	}
	clientIn.Close()
}
