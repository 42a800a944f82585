package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// openFDs lists this process's descriptors with what each refers to.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory ReadDir had open
		}
		out[e.Name()] = target
	}
	return out
}

// leaked lists the descriptors of after that are not in before.
func leaked(before, after map[string]string) []string {
	var out []string
	for fd, target := range after {
		if before[fd] != target {
			out = append(out, fd+" → "+target)
		}
	}
	slices.Sort(out)
	return out
}

// TestCmdReleasesDescriptors: whatever happens to a Cmd (never started,
// run to the end, a setup failure, a failing BeforeAgent hook), Close or
// Wait leaves this process with the descriptors it had before Command.
// Not parallel: it counts the whole process's descriptors.
func TestCmdReleasesDescriptors(t *testing.T) {
	policy := &PolicyGate{Decide: func(PolicyCall) bool { return true }}
	hook := func(c *Cmd) error {
		f, err := c.SocketIn(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		return f.Close()
	}
	boom := errors.New("hook refused")
	// A first run opens what the process keeps for good (the runtime's
	// poller...).
	warm := newConfig(t, nil)
	warm.Network, warm.Policy, warm.BeforeAgent = true, policy, hook
	if c, err := Command(warm, []string{"/bin/true"}, nil, warm.Workspace); err != nil {
		t.Fatal(err)
	} else if err := c.Start(); err != nil {
		t.Fatal(err)
	} else if err := c.Wait(); err != nil {
		t.Fatalf("the first run: %v", err)
	}
	for _, tc := range []struct {
		name   string
		dir    string                 // the agent's working directory ("" = the workspace)
		before func(*Cmd) error       // Config.BeforeAgent
		end    func(*testing.T, *Cmd) // what the test does with the command
	}{
		{name: "never started, Close", end: func(t *testing.T, c *Cmd) {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("a second Close: %v", err)
			}
		}},
		{name: "never started, Wait", end: func(t *testing.T, c *Cmd) {
			if err := c.Wait(); err == nil {
				t.Error("Wait of a command never started returned nil")
			}
		}},
		{name: "run", before: hook, end: func(t *testing.T, c *Cmd) {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if err := c.Wait(); err != nil {
				t.Errorf("Wait: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close after Wait: %v", err)
			}
		}},
		{name: "setup failure", dir: "/nonexistent-dal-dir", before: hook, end: func(t *testing.T, c *Cmd) {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			var se *SetupError
			if err := c.Ready(); !errors.As(err, &se) {
				t.Errorf("Ready: %v, want a setup error", err)
			}
			c.Wait()
		}},
		{name: "hook fails, Close then Wait", before: func(*Cmd) error { return boom }, end: func(t *testing.T, c *Cmd) {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if err := c.Ready(); !errors.Is(err, boom) {
				t.Errorf("Ready: %v, want the hook's error", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := c.Wait(); !errors.Is(err, boom) {
				t.Errorf("Wait: %v, want the hook's error", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newConfig(t, nil)
			cfg.Network, cfg.Policy, cfg.BeforeAgent = true, policy, tc.before
			dir := tc.dir
			if dir == "" {
				dir = cfg.Workspace
			}
			before := openFDs(t)
			c, err := Command(cfg, []string{"/bin/true"}, []string{"PATH=/usr/bin:/bin"}, dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(openFDs(t)) <= len(before) {
				t.Fatal("Command opened no descriptor: the test counts nothing")
			}
			tc.end(t, c)
			if l := leaked(before, openFDs(t)); len(l) > 0 {
				t.Errorf("%d descriptors left open: %s", len(l), strings.Join(l, ", "))
			}
		})
	}
}

// TestCmdsDoNotInterfere: two sandboxes whose BeforeAgent hooks run at the
// same time each open a listener at the same address in their own
// namespace through their own Cmd, and each agent reaches its own.
func TestCmdsDoNotInterfere(t *testing.T) {
	t.Parallel()
	names := []string{"a", "b"}
	cmds := make([]*Cmd, len(names))
	outs := make([]bytes.Buffer, len(names))
	inHook := []chan struct{}{make(chan struct{}), make(chan struct{})}
	readyDone := []chan struct{}{make(chan struct{}), make(chan struct{})}
	served := make(chan string, len(names))
	for i, name := range names {
		other := 1 - i
		cfg := newConfig(t, nil)
		cfg.Network = true
		cfg.BeforeAgent = func(c *Cmd) error {
			if c != cmds[i] {
				return fmt.Errorf("sandbox %s's hook got another Cmd", name)
			}
			close(inHook[i])
			select { // both gates are open from here on
			case <-inHook[other]:
			case <-readyDone[other]:
				return fmt.Errorf("sandbox %s stopped before its hook", names[other])
			}
			l, err := c.ListenIn("127.0.0.1:80")
			if err != nil {
				return err
			}
			go func() {
				defer l.Close()
				conn, err := l.Accept()
				if err != nil {
					served <- "accept: " + err.Error()
					return
				}
				conn.Write([]byte(name + "\n"))
				conn.Close()
				served <- name
			}()
			return nil
		}
		c, err := Command(cfg, []string{"/usr/bin/python3", "-c",
			`import socket; print(socket.create_connection(("127.0.0.1", 80)).recv(10).decode().strip())`},
			[]string{"PATH=/usr/bin:/bin"}, cfg.Workspace)
		if err != nil {
			t.Fatal(err)
		}
		c.Stdout, c.Stderr = &outs[i], &outs[i]
		cmds[i] = c
	}
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(cmds))
	for i, c := range cmds {
		wg.Go(func() {
			errs[i] = c.Ready()
			close(readyDone[i])
			if err := c.Wait(); errs[i] == nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	for i, name := range names {
		if errs[i] != nil {
			t.Fatalf("sandbox %s: %v (output %q)", name, errs[i], outs[i].String())
		}
		if got := outs[i].String(); got != name+"\n" {
			t.Errorf("sandbox %s's agent reached %q, want its own listener", name, got)
		}
	}
	for range names {
		if s := <-served; !slices.Contains(names, s) {
			t.Errorf("a listener: %s", s)
		}
	}
	if _, err := cmds[0].ListenIn("127.0.0.1:81"); err == nil || !strings.Contains(err.Error(), "call it from Config.BeforeAgent") {
		t.Errorf("ListenIn after the hook: %v, want an error saying when to call it", err)
	}
}
