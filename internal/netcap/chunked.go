package netcap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"time"

	"github.com/dal-runtime/dal/internal/netcap/har"
)

// maxFrame is the largest upstream chunk relayed to the client as one
// chunk: it is read whole, then written and flushed. A larger one is
// relayed piece by piece as it arrives (so the client sees it as several
// chunks) and still recorded as one.
const maxFrame = 1 << 20

// Limits on a chunked body's framing, as net/http has them: a size line's
// length, and how far the framing may outgrow the data (tiny chunks with
// long extensions).
const (
	maxChunkLine   = 4096
	maxChunkExcess = 16 << 10
)

// chunkReader reads the framing of a chunked body (RFC 9112 §7.1) off the
// connection's reader, so that every chunk the server sent is seen as one.
type chunkReader struct {
	br     *bufio.Reader
	excess int64
}

// size reads a chunk's size line and returns the size, extensions
// ignored; 0 is the last chunk.
func (cr *chunkReader) size() (uint64, error) {
	line, err := cr.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return 0, errors.New("chunk size line too long")
	case errors.Is(err, io.EOF):
		return 0, io.ErrUnexpectedEOF
	case err != nil:
		return 0, err
	case len(line) > maxChunkLine:
		return 0, errors.New("chunk size line too long")
	case !bytes.HasSuffix(line, []byte("\r\n")) || bytes.IndexByte(line, '\r') != len(line)-2:
		return 0, errors.New("chunk size line not ended by CRLF")
	}
	line = line[:len(line)-2]
	cr.excess += int64(len(line)) + 2 // the size line, and the CRLF after the data
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimRight(line, " \t")
	if len(line) == 0 || len(line) > 16 {
		return 0, fmt.Errorf("chunk size %q is not a hexadecimal number", line)
	}
	var n uint64
	for _, b := range line {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b -= 'a' - 10
		case 'A' <= b && b <= 'F':
			b -= 'A' - 10
		default:
			return 0, fmt.Errorf("chunk size %q is not a hexadecimal number", line)
		}
		n = n<<4 | uint64(b)
	}
	cr.excess = max(cr.excess-16-2*int64(min(n, 1<<40)), 0)
	if cr.excess > maxChunkExcess {
		return 0, errors.New("the chunked encoding holds too much besides data")
	}
	return n, nil
}

// end reads the CRLF that ends a chunk's data.
func (cr *chunkReader) end() error {
	var b [2]byte
	if _, err := io.ReadFull(cr.br, b[:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if b != [2]byte{'\r', '\n'} {
		return errors.New("chunk data not followed by CRLF")
	}
	return nil
}

// trailer reads, and drops, the trailer section after the last chunk.
func (cr *chunkReader) trailer(lim *limitReader) error {
	lim.n = maxHeaderBytes
	defer func() { lim.n = -1 }()
	if _, err := textproto.NewReader(cr.br).ReadMIMEHeader(); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading the trailer: %w", err)
	}
	return nil
}

// relayChunked relays a chunked body read off c frame by frame: every
// chunk is written to w and flushed as soon as it is read (a chunk over
// maxFrame piece by piece) and recorded as one chunk.
func relayChunked(w io.Writer, sw *streamWriter, c *upConn, headersAt time.Time) relayed {
	type mark struct {
		end int
		at  time.Duration
	}
	var (
		marks []mark
		res   relayed
		buf   []byte
	)
	cr := &chunkReader{br: c.br}
	write := func(p []byte) bool {
		if err := writeFlush(w, sw, p); err != nil {
			res.writeErr = err
			return false
		}
		res.delivered += int64(len(p))
		return true
	}
	for res.readErr == nil && res.writeErr == nil {
		size, err := cr.size()
		if err != nil {
			res.readErr = err
			break
		}
		if size == 0 {
			res.readErr = cr.trailer(c.lim)
			res.complete = res.readErr == nil
			break
		}
		start := len(buf)
		if size <= maxFrame {
			buf = grow(buf, int(size))
			n, err := io.ReadFull(c.br, buf[start:start+int(size)])
			buf = buf[:start+n]
			if err != nil {
				res.readErr = unexpectedEOF(err)
				break
			}
			marks = append(marks, mark{end: len(buf), at: time.Since(headersAt)})
			if !write(buf[start:]) {
				break
			}
		} else {
			buf = grow(buf, int(min(size, maxPrealloc)))
			for left := size; left > 0; {
				if len(buf) == cap(buf) {
					buf = grow(buf, int(min(left, maxPrealloc)))
				}
				room := buf[len(buf):cap(buf)]
				if uint64(len(room)) > left {
					room = room[:left]
				}
				n, err := c.br.Read(room)
				if n > 0 {
					buf = buf[:len(buf)+n]
					left -= uint64(n)
					if !write(room[:n]) {
						break
					}
				}
				if err != nil && left > 0 {
					res.readErr = unexpectedEOF(err)
					break
				}
			}
			if res.readErr != nil || res.writeErr != nil {
				break
			}
			marks = append(marks, mark{end: len(buf), at: time.Since(headersAt)})
		}
		res.readErr = cr.end()
	}
	if buf == nil {
		buf = []byte{}
	}
	if n := len(marks); len(buf) > 0 && (n == 0 || marks[n-1].end < len(buf)) {
		// The part of a chunk read before a failure.
		marks = append(marks, mark{end: len(buf), at: time.Since(headersAt)})
	}
	res.body = buf
	prev := 0
	for _, m := range marks {
		res.chunks = append(res.chunks, har.Chunk{At: m.at, Data: buf[prev:m.end:m.end]})
		prev = m.end
	}
	return res
}

// grow returns buf with room for need more bytes: as is when it has it,
// otherwise a copy at least twice as large.
func grow(buf []byte, need int) []byte {
	if cap(buf)-len(buf) >= need {
		return buf
	}
	nb := make([]byte, len(buf), max(2*cap(buf), len(buf)+need, 4<<10))
	copy(nb, buf)
	return nb
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
