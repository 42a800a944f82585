// Package wire is dald's protocol: length-prefixed frames carrying msgpack
// maps, the request and reply messages of docs/protocol.md, the DAL_*
// variables that carry a session to its processes, and where dald listens
// by default (DefaultSocket).
//
// It knows nothing of sessions or clocks; internal/daemon serves it and
// dal-exec and the Go client speak it.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Proto is the protocol version this build speaks.
const Proto = 1

// DefaultMaxFrame caps a frame body unless configured otherwise.
const DefaultMaxFrame = 4 << 20

// ErrFrameSize reports a frame whose declared length is zero or over the limit.
var ErrFrameSize = errors.New("frame size out of range")

// eagerFrame is the largest body ReadFrame allocates before its bytes
// arrive. A larger declared length is read in doubling steps, so a peer
// that announces 4 MiB and sends nothing costs 64 KiB, not 4 MiB.
const eagerFrame = 64 << 10

// ReadFrame reads one frame body from r. Its length prefix must be in
// [1, max]; otherwise it returns an error wrapping ErrFrameSize without
// reading the body. A connection closed inside a frame is io.ErrUnexpectedEOF;
// closed between frames, io.EOF. Memory grows with the bytes received, not
// with the length announced.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || uint64(n) > uint64(max) {
		return nil, fmt.Errorf("frame of %d bytes (limit %d): %w", n, max, ErrFrameSize)
	}
	body := make([]byte, min(int(n), eagerFrame))
	for got := 0; ; {
		if _, err := io.ReadFull(r, body[got:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		got = len(body)
		if got == int(n) {
			return body, nil
		}
		body = append(body, make([]byte, min(int(n)-got, got))...)
	}
}

// AppendFrame appends the frame for body to dst.
func AppendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}

// WriteFrame writes body as one frame; it fails if body exceeds max.
func WriteFrame(w io.Writer, body []byte, max int) error {
	if len(body) == 0 || len(body) > max {
		return fmt.Errorf("frame of %d bytes (limit %d): %w", len(body), max, ErrFrameSize)
	}
	if bw, ok := w.(*bufio.Writer); ok {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
		bw.Write(hdr[:])
		_, err := bw.Write(body)
		return err
	}
	_, err := w.Write(AppendFrame(make([]byte, 0, 4+len(body)), body))
	return err
}
