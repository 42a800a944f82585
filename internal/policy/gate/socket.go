package gate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// message is what a client sends.
type message struct {
	Op      string `json:"op"` // list, decide, watch
	ID      string `json:"id,omitempty"`
	Approve bool   `json:"approve,omitempty"`
	Via     string `json:"via,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Listing is one run's pending requests, as a socket answers list and
// watch.
type Listing struct {
	Run     string    `json:"run"`
	Socket  string    `json:"socket,omitempty"`
	Pending []Request `json:"pending"`
	Error   string    `json:"error,omitempty"`
}

// maxLine bounds a client's message.
const maxLine = 64 << 10

// Server serves a Queue on a Unix socket in Dir.
type Server struct {
	q    *Queue
	ln   *net.UnixListener
	path string
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
	done  bool
}

// Serve creates dir (0700, refused if it is a symbolic link or another
// user's) and serves q at dir/<pid>.sock until Close.
func Serve(q *Queue, dir string) (*Server, error) {
	if err := ownDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, strconv.Itoa(os.Getpid())+".sock")
	os.Remove(path) // a dead run of ours with the same pid
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("open the policy's approval socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("open the policy's approval socket: %w", err)
	}
	s := &Server{q: q, ln: ln, path: path, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close stops serving, hangs up every client and removes the socket.
func (s *Server) Close() {
	s.mu.Lock()
	s.done = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close() // removes the socket file (unlink on close)
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// serve answers one client.
func (s *Server) serve(c *net.UnixConn) {
	enc := json.NewEncoder(c)
	who, err := peer(c)
	if err != nil {
		enc.Encode(map[string]string{"error": err.Error()})
		return
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), maxLine)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			enc.Encode(map[string]string{"error": "not a JSON message"})
			return
		}
		switch m.Op {
		case "list":
			enc.Encode(Listing{Run: s.q.run, Pending: s.q.Pending()})
		case "decide":
			by := who
			if v := oneLine(m.Via); v != "" {
				by += " via " + v
			}
			if err := s.q.Decide(m.ID, Verdict{Approve: m.Approve, By: by, Reason: oneLine(m.Reason)}); err != nil {
				enc.Encode(map[string]string{"error": err.Error()})
			} else {
				enc.Encode(struct{}{})
			}
		case "watch":
			s.watch(c, enc)
			return
		default:
			enc.Encode(map[string]string{"error": fmt.Sprintf("unknown op %q", m.Op)})
		}
	}
}

// watch sends the listing now and after every change until the client
// hangs up or the server closes.
func (s *Server) watch(c net.Conn, enc *json.Encoder) {
	ch, cancel := s.q.Subscribe()
	defer cancel()
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				close(gone)
				return
			}
		}
	}()
	for {
		if enc.Encode(Listing{Run: s.q.run, Pending: s.q.Pending()}) != nil {
			return
		}
		select {
		case <-ch:
		case <-gone:
			return
		}
	}
}

// oneLine keeps the first line of s, at most 200 bytes: what a decider
// says is shown on terminals and in the audit.
func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.TrimSpace(s)
}

// peer checks the client: the same user or root, in this PID namespace.
// It returns how the audit names it.
func peer(c *net.UnixConn) (string, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return "", fmt.Errorf("read the peer's credentials: %w", cerr)
	}
	if int(cred.Uid) != os.Getuid() && cred.Uid != 0 {
		return "", errors.New("only the run's own user or root may decide its requests")
	}
	if !samePIDNamespace(int(cred.Pid)) {
		return "", errors.New("a process in another PID namespace (the agent's sandbox) may not decide requests")
	}
	name := "uid " + strconv.Itoa(int(cred.Uid))
	if u, err := user.LookupId(strconv.Itoa(int(cred.Uid))); err == nil {
		name += " (" + u.Username + ")"
	}
	return name, nil
}

// samePIDNamespace reports whether pid (as this namespace sees it) runs
// in this process's PID namespace. A peer in a child namespace has a pid
// here too, but its namespace differs.
func samePIDNamespace(pid int) bool {
	if pid <= 0 {
		return false
	}
	mine, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return false
	}
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	return err == nil && theirs == mine
}

// ownDir creates dir (and its parent) 0700 and checks that dir is a real
// directory of this user's, 0700.
func ownDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("create %s for the policy's approval socket: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s for the policy's approval socket: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode()&os.ModeSymlink != 0 || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is not a private directory of yours (a link, another user's, or open to others): remove it and run again", dir)
	}
	return nil
}

// dial connects to one gate socket.
func dial(ctx context.Context, path string) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}

// call sends m to the socket at path and reads one answer into out.
func call(ctx context.Context, path string, m message, out any) error {
	c, err := dial(ctx, path)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	b, _ := json.Marshal(m)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return err
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), 16<<20)
	if !sc.Scan() {
		if sc.Err() != nil {
			return sc.Err()
		}
		return errors.New("the run hung up")
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(sc.Bytes(), &e) == nil && e.Error != "" {
		return errors.New(e.Error)
	}
	return json.Unmarshal(sc.Bytes(), out)
}

// List asks every run in dir for its pending requests. A socket that does
// not answer (a run that just ended) is left out.
func List(ctx context.Context, dir string) []Listing {
	var out []Listing
	for _, p := range Sockets(dir) {
		var l Listing
		if err := call(ctx, p, message{Op: "list"}, &l); err != nil {
			continue
		}
		l.Socket = p
		out = append(out, l)
	}
	return out
}

// Decide answers the request id of whichever run in dir holds it; via
// says how ("dal-exec approve", "dald gate page").
func Decide(ctx context.Context, dir, id string, approve bool, via, reason string) error {
	pid, _, ok := strings.Cut(id, ".")
	if !ok || pid == "" {
		return fmt.Errorf("%q is not a request ID: IDs look like 4242.1 (see dal-exec approve --list)", id)
	}
	if _, err := strconv.Atoi(pid); err != nil {
		return fmt.Errorf("%q is not a request ID: IDs look like 4242.1 (see dal-exec approve --list)", id)
	}
	path := filepath.Join(dir, pid+".sock")
	var ok2 struct{}
	err := call(ctx, path, message{Op: "decide", ID: id, Approve: approve, Via: via, Reason: reason}, &ok2)
	if err != nil && strings.HasSuffix(err.Error(), ErrUnknown.Error()) {
		return fmt.Errorf("%s: %w", id, ErrUnknown)
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("no running dal-exec holds request %s (it ended, or was decided): list the pending ones with dal-exec approve --list", id)
	}
	return err
}

// Watch sends the listing of the run at path whenever it changes, until
// ctx ends or the run does; then the channel closes.
func Watch(ctx context.Context, path string) (<-chan Listing, error) {
	c, err := dial(ctx, path)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte(`{"op":"watch"}` + "\n")); err != nil {
		c.Close()
		return nil, err
	}
	out := make(chan Listing)
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	go func() {
		defer close(out)
		defer c.Close()
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 4096), 16<<20)
		for sc.Scan() {
			var l Listing
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				return
			}
			l.Socket = path
			select {
			case out <- l:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
