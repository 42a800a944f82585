package wire

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Client is a synchronous connection to dald: one request in flight at a
// time. It is safe for concurrent use.
type Client struct {
	mu     sync.Mutex
	conn   net.Conn
	r      *bufio.Reader
	nextID uint64
	max    int
}

// ErrRemote wraps an error reply from dald; its text is dald's sentence.
var ErrRemote = errors.New("dald refused")

// Dial connects to the socket at path and says hello. The hello reply is
// returned; a protocol mismatch is an error naming both versions.
func Dial(path string, hello Request) (*Client, Reply, error) {
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, Reply{}, err
	}
	c := &Client{conn: conn, r: bufio.NewReader(conn), max: DefaultMaxFrame}
	hello.Op, hello.Proto = OpHello, Proto
	if hello.PID == 0 {
		hello.PID, hello.PPID = os.Getpid(), os.Getppid()
	}
	rep, err := c.Call(hello)
	if err != nil {
		conn.Close()
		if rep.Proto != 0 && rep.Proto != Proto {
			return nil, rep, fmt.Errorf("dald at %s speaks protocol %d (release %s), this build speaks %d: run a dald from the same release, or drop --socket/DAL_SOCKET to use the embedded one", path, rep.Proto, rep.Version, Proto)
		}
		return nil, rep, err
	}
	return c, rep, nil
}

// Call sends req and waits for its reply. An error reply is returned as an
// error wrapping ErrRemote, together with the reply.
func (c *Client) Call(req Request) (Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	req.ID = c.nextID
	body, err := Encode(&req)
	if err != nil {
		return Reply{}, err
	}
	if err := WriteFrame(c.conn, body, c.max); err != nil {
		return Reply{}, fmt.Errorf("send %s: %w", req.Op, err)
	}
	raw, err := ReadFrame(c.r, c.max)
	if err != nil {
		return Reply{}, fmt.Errorf("read reply to %s: %w", req.Op, err)
	}
	rep, err := DecodeReply(raw)
	if err != nil {
		return Reply{}, err
	}
	if rep.ID == 0 && !rep.OK {
		// About the connection, not this request (e.g. closed when idle).
		return rep, fmt.Errorf("%w: %s", ErrRemote, rep.Err)
	}
	if rep.ID != req.ID {
		return rep, fmt.Errorf("reply id %d to request %d: the connection is out of step", rep.ID, req.ID)
	}
	if !rep.OK {
		return rep, fmt.Errorf("%w: %s", ErrRemote, rep.Err)
	}
	return rep, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
