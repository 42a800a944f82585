package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"sync"

	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
)

// With Config.Settle the gate stays open while the agent runs, for one
// more exchange:
//
//	parent → init: 'Q' + id (8 bytes)   answer once the agent's tree has settled
//	init → parent: 'q' + id
//	parent → init: 'O' + pairs          the proxy's connections that owe a
//	                                    response (2 × uint16 each: the agent's
//	                                    port, the proxy's), replacing the last
//
// The init answers requests in order, each when the syscall layer finds
// every thread of the tree blocked on something only the outside can end
// (sysvirt.Supervisor.Settled). A parent that gave up on a request (its
// context ended) reads that answer later and drops it.

// ErrNoSettle is Settle's error for a sandbox that cannot tell: started
// without Config.Settle, or its init is gone.
var ErrNoSettle = errors.New("sandbox: the agent's tree cannot be watched for settling")

// settler is dal-exec's end of a gate kept for Settle.
type settler struct {
	wanted bool
	mu     sync.Mutex // one request at a time
	wmu    sync.Mutex // one message written at a time
	gate   *os.File
	next   uint64
	// answers carries the ids the init answered; closed when the gate
	// fails.
	answers chan uint64
	once    sync.Once
}

// take keeps gate for Settle and starts reading its answers.
func (s *settler) take(gate *os.File) {
	s.gate = gate
	s.answers = make(chan uint64, 16)
	go func() {
		defer close(s.answers)
		buf := make([]byte, 16)
		for {
			n, err := gate.Read(buf)
			if err != nil || n != 9 || buf[0] != 'q' {
				return
			}
			s.answers <- binary.NativeEndian.Uint64(buf[1:])
		}
	}()
}

func (s *settler) close() {
	s.once.Do(func() {
		if s.gate != nil {
			s.gate.Close()
		}
	})
}

// Settles reports whether c's agent's tree can be watched for settling
// (Config.Settle, with a gate and the syscall layer).
func (c *Cmd) Settles() bool { return c.settle.wanted }

// Settle returns once every thread of the agent's tree is blocked on
// something only the outside can end (a response on a socket, input on a
// pipe from outside the tree), and no thread ran while that was being
// checked: the moment to hand the tree its next input so that what it does
// with it does not depend on timing. It returns ctx's error when ctx ends
// first, and ErrNoSettle when the sandbox cannot tell (no Config.Settle,
// or the init is gone). Safe for concurrent use; requests take turns.
func (c *Cmd) Settle(ctx context.Context) error {
	s := &c.settle
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		return ErrNoSettle
	}
	s.next++
	id := s.next
	if err := s.write(binary.NativeEndian.AppendUint64([]byte{'Q'}, id)); err != nil {
		return ErrNoSettle
	}
	for {
		select {
		case got, ok := <-s.answers:
			if !ok {
				return ErrNoSettle
			}
			if got == id {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *settler) write(msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.gate.Write(msg)
	return err
}

// maxOwed bounds the pairs one message carries (a gate message is at
// most 512 bytes to the init's reader).
const maxOwed = 120

// Owed tells the syscall layer which of the proxy's connections owe the
// agent a response, each by the agent's port and the proxy's: waits on
// them do not expire on latency (sysvirt's owed.go). Beyond maxOwed
// connections the rest are left out (their waits expire as the kernel's
// would). A sandbox without Config.Settle ignores it.
func (c *Cmd) Owed(pairs [][2]uint16) {
	s := &c.settle
	if s.gate == nil {
		return
	}
	msg := []byte{'O'}
	for i, p := range pairs {
		if i == maxOwed {
			break
		}
		msg = binary.NativeEndian.AppendUint16(msg, p[0])
		msg = binary.NativeEndian.AppendUint16(msg, p[1])
	}
	s.write(msg)
}

// serveSettle answers the parent's settle requests on gate until it
// closes (the init's side).
func serveSettle(gate *os.File, v *sysvirt.Supervisor) {
	fd := int(gate.Fd())
	settles := make(chan [8]byte, 64)
	defer close(settles)
	go func() {
		for id := range settles {
			v.Settled(context.Background())
			if err := unix.Sendmsg(fd, append([]byte{'q'}, id[:]...), nil, nil, 0); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 1+4*maxOwed)
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			gate.Close()
			return
		}
		switch {
		case n == 9 && buf[0] == 'Q':
			var id [8]byte
			copy(id[:], buf[1:9])
			settles <- id
		case buf[0] == 'O' && (n-1)%4 == 0:
			pairs := make([][2]uint16, 0, (n-1)/4)
			for i := 1; i+4 <= n; i += 4 {
				pairs = append(pairs, [2]uint16{binary.NativeEndian.Uint16(buf[i:]), binary.NativeEndian.Uint16(buf[i+2:])})
			}
			v.SetOwed(pairs)
		default:
			gate.Close()
			return
		}
	}
}
