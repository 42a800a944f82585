package wire

import (
	"errors"
	"fmt"
)

// maxDepth bounds nesting in a request; protocol 1 needs 3.
const maxDepth = 16

var errTruncated = errors.New("msgpack value runs past the end of the frame")

// check walks a msgpack body before it is decoded and rejects any declared
// length that the frame cannot hold. The decoder preallocates from declared
// lengths, so without this a 20-byte frame announcing a 4-billion-element
// array would exhaust memory. It also rejects trailing bytes and excessive
// nesting.
func check(b []byte) error {
	off, err := skip(b, 0, 0)
	if err != nil {
		return err
	}
	if off != len(b) {
		return fmt.Errorf("%d bytes after the msgpack value", len(b)-off)
	}
	return nil
}

// skip returns the offset just past the value at off.
func skip(b []byte, off, depth int) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("msgpack nesting deeper than %d", maxDepth)
	}
	if off >= len(b) {
		return 0, errTruncated
	}
	c := b[off]
	off++
	// need returns the n bytes after off as a length, big-endian.
	need := func(n int) (int, error) {
		if off+n > len(b) {
			return 0, errTruncated
		}
		var v uint64
		for _, x := range b[off : off+n] {
			v = v<<8 | uint64(x)
		}
		off += n
		if v > uint64(len(b)) {
			return 0, errTruncated
		}
		return int(v), nil
	}
	bytesOf := func(n int) (int, error) {
		if off+n > len(b) {
			return 0, errTruncated
		}
		return off + n, nil
	}
	elems := func(n, per int) (int, error) {
		if n*per > len(b)-off {
			return 0, errTruncated
		}
		var err error
		for i := 0; i < n*per; i++ {
			if off, err = skip(b, off, depth+1); err != nil {
				return 0, err
			}
		}
		return off, nil
	}
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		return off, nil
	case c&0xe0 == 0xa0: // fixstr
		return bytesOf(int(c & 0x1f))
	case c&0xf0 == 0x90: // fixarray
		return elems(int(c&0x0f), 1)
	case c&0xf0 == 0x80: // fixmap
		return elems(int(c&0x0f), 2)
	}
	switch c {
	case 0xcc, 0xd0:
		return bytesOf(1)
	case 0xcd, 0xd1:
		return bytesOf(2)
	case 0xce, 0xd2, 0xca:
		return bytesOf(4)
	case 0xcf, 0xd3, 0xcb:
		return bytesOf(8)
	case 0xd9, 0xc4: // str8, bin8
		n, err := need(1)
		if err != nil {
			return 0, err
		}
		return bytesOf(n)
	case 0xda, 0xc5:
		n, err := need(2)
		if err != nil {
			return 0, err
		}
		return bytesOf(n)
	case 0xdb, 0xc6:
		n, err := need(4)
		if err != nil {
			return 0, err
		}
		return bytesOf(n)
	case 0xdc, 0xde: // array16, map16
		n, err := need(2)
		if err != nil {
			return 0, err
		}
		return elems(n, map[byte]int{0xdc: 1, 0xde: 2}[c])
	case 0xdd, 0xdf:
		n, err := need(4)
		if err != nil {
			return 0, err
		}
		return elems(n, map[byte]int{0xdd: 1, 0xdf: 2}[c])
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16
		return bytesOf(1 + 1<<(c-0xd4))
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32: length, type byte, data
		n, err := need(map[byte]int{0xc7: 1, 0xc8: 2, 0xc9: 4}[c])
		if err != nil {
			return 0, err
		}
		return bytesOf(n + 1)
	}
	return 0, fmt.Errorf("byte 0x%02x is not msgpack", c)
}
