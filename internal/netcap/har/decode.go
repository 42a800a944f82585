package har

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

func isUTF8(b []byte) bool { return utf8.Valid(b) }

// codings returns a Content-Encoding's codings in the order they were
// applied, lower-case, without identity.
func codings(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				out = append(out, c)
			}
		}
	}
	return out
}

// errUnknownCoding reports a content coding dal cannot decode.
var errUnknownCoding = errors.New("unknown content coding")

// maxDecoded bounds a decoded body; a bigger one (a compression bomb) is
// stored as received.
const maxDecoded = 256 << 20

var errTooLarge = errors.New("decoded body exceeds 256 MiB")

// decoder wraps r in the decoders that undo codings (applied in order).
// The returned close releases them.
func decoder(r io.Reader, cs []string) (io.Reader, func(), error) {
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for i := len(cs) - 1; i >= 0; i-- {
		switch cs[i] {
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(r)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("gzip: %w", err)
			}
			r = zr
		case "deflate":
			// "deflate" is zlib by the RFC, raw deflate by some servers:
			// a zlib header is two bytes whose big-endian value is a
			// multiple of 31, with compression method 8.
			br := bufio.NewReader(r)
			head, _ := br.Peek(2)
			if len(head) == 2 && head[0]&0x0f == 8 && (uint16(head[0])<<8|uint16(head[1]))%31 == 0 {
				zr, err := zlib.NewReader(br)
				if err != nil {
					closeAll()
					return nil, nil, fmt.Errorf("deflate: %w", err)
				}
				r = zr
			} else {
				fr := flate.NewReader(br)
				closers = append(closers, func() { fr.Close() })
				r = fr
			}
		case "br":
			r = brotli.NewReader(r)
		case "zstd":
			zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<27))
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("zstd: %w", err)
			}
			closers = append(closers, zr.Close)
			r = zr
		default:
			closeAll()
			return nil, nil, fmt.Errorf("%w %q", errUnknownCoding, cs[i])
		}
	}
	return r, closeAll, nil
}

// decodeBody removes the codings from a whole body.
func decodeBody(body []byte, cs []string) ([]byte, error) {
	if len(cs) == 0 {
		return body, nil
	}
	r, closeAll, err := decoder(bytes.NewReader(body), cs)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	out, err := io.ReadAll(io.LimitReader(r, maxDecoded+1))
	if err == nil && len(out) > maxDecoded {
		err = errTooLarge
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cs, ", "), err)
	}
	return out, nil
}

// decodeChunks removes the codings from a body recorded in pieces and
// returns, for each piece, the decoded bytes the decoder produced once it
// had consumed that piece and asked for more. Output still buffered when
// the input ends belongs to the last piece. Empty pieces decode to
// nothing.
//
// The decoder runs in a goroutine reading from a feeder that hands it one
// piece at a time and reports when it has used all of it; the goroutine
// ends before decodeChunks returns.
func decodeChunks(pieces [][]byte, cs []string) ([][]byte, error) {
	out := make([][]byte, len(pieces))
	if len(cs) == 0 {
		copy(out, pieces)
		return out, nil
	}
	f := &feeder{in: make(chan []byte), idle: make(chan struct{})}
	var decoded bytes.Buffer // written by the goroutine between handoffs
	done := make(chan error, 1)
	go func() {
		r, closeAll, err := decoder(f, cs)
		if err != nil {
			done <- err
			return
		}
		defer closeAll()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			decoded.Write(buf[:n])
			if decoded.Len() > maxDecoded {
				done <- errTooLarge
				return
			}
			if err == io.EOF {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()

	last := -1 // the piece the decoder is working on
	mark := 0  // decoded.Len() when that piece was handed over
	take := func() {
		if last >= 0 {
			out[last] = append(out[last], decoded.Bytes()[mark:]...)
		}
		mark = decoded.Len()
	}
	var derr error
	finished := false
	for i, p := range pieces {
		if len(p) == 0 {
			continue
		}
		select {
		case <-f.idle:
		case derr = <-done:
			finished = true
		}
		take()
		if finished {
			break
		}
		last = i
		f.in <- p
	}
	close(f.in)
	for !finished {
		select {
		case <-f.idle:
		case derr = <-done:
			finished = true
		}
	}
	take()
	if derr != nil {
		return out, fmt.Errorf("%s: %w", strings.Join(cs, ", "), derr)
	}
	return out, nil
}

// feeder is the decoder goroutine's input in decodeChunks.
type feeder struct {
	in   chan []byte   // the next piece; closed after the last
	idle chan struct{} // the current piece is used up
	cur  []byte
}

func (f *feeder) Read(p []byte) (int, error) {
	if len(f.cur) == 0 {
		f.idle <- struct{}{}
		b, ok := <-f.in
		if !ok {
			return 0, io.EOF
		}
		f.cur = b
	}
	n := copy(p, f.cur)
	f.cur = f.cur[n:]
	return n, nil
}
