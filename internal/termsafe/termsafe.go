// Package termsafe makes text that dal did not write safe to print on a
// terminal. A bundle is hostile (docs/design.md §12): its logs, file names,
// divergence texts and prompts may carry escape sequences that set the
// window title, write the clipboard (OSC 52), move the cursor over
// earlier lines, or reorder what the reader sees (Trojan Source bidi
// overrides). termsafe replaces every such character by a visible
// escape before it reaches the terminal.
//
// Escaped, as \xNN for a byte or \uNNNN for a character:
//   - C0 controls (U+0000–U+001F) except newline and tab (String and
//     Writer keep those two; Line escapes them too), and DEL (U+007F):
//     this covers ESC, which starts every CSI, OSC, DCS and APC
//     sequence, and BEL and CR;
//   - C1 controls (U+0080–U+009F), which some terminals read as CSI or
//     OSC on their own;
//   - the bidirectional formatting characters: embeddings and overrides
//     U+202A–U+202E, isolates U+2066–U+2069, and the marks U+200E,
//     U+200F and U+061C;
//   - every byte that is not part of valid UTF-8.
//
// Everything else, including backslashes and all printable Unicode,
// passes unchanged, so a clean string comes back as is without
// allocating. The escaped form is for reading, not for parsing back: a
// literal backslash followed by "x1b" looks like an escaped ESC.
//
// termsafe is for what is shown to a person. Files a user asked for
// (an output file, a restored workspace) are written verbatim.
package termsafe

import (
	"io"
	"unicode/utf8"
)

// String returns s with the characters listed in the package comment
// escaped; newlines and tabs are kept.
func String(s string) string { return escape(s, false) }

// Line is String for text that must stay on one line (a file name, a
// summary): newlines and tabs are escaped too, so the text cannot fake
// a line of dal's own output.
func Line(s string) string { return escape(s, true) }

// Bytes is String for a byte slice.
func Bytes(b []byte) []byte {
	if clean(string(b), false) == len(b) {
		return b
	}
	return []byte(escape(string(b), false))
}

// clean returns the length of s's longest prefix that needs no escape.
func clean(s string, oneLine bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if unsafeASCII(c, oneLine) {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unsafeRune(r) {
			return i
		}
		i += n
	}
	return len(s)
}

func unsafeASCII(c byte, oneLine bool) bool {
	switch {
	case c == '\n' || c == '\t':
		return oneLine
	case c < 0x20 || c == 0x7f:
		return true
	}
	return false
}

func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f: // C1 controls
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

const hexDigits = "0123456789abcdef"

func escape(s string, oneLine bool) string {
	i := clean(s, oneLine)
	if i == len(s) {
		return s
	}
	out := make([]byte, 0, len(s)+16)
	out = append(out, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if unsafeASCII(c, oneLine) {
				out = appendByteEscape(out, c)
			} else {
				out = append(out, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = appendByteEscape(out, c)
		case unsafeRune(r):
			out = append(out, '\\', 'u',
				hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			out = append(out, s[i:i+n]...)
		}
		i += n
	}
	return string(out)
}

func appendByteEscape(out []byte, c byte) []byte {
	switch c {
	case '\n':
		return append(out, '\\', 'n')
	case '\t':
		return append(out, '\\', 't')
	case '\r':
		return append(out, '\\', 'r')
	}
	return append(out, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
}

// Writer escapes everything written through it (as String does) before
// passing it on. A UTF-8 sequence split across two Writes is escaped as
// a whole; Close flushes a sequence left incomplete at the end (as \xNN
// escapes) and does not close the underlying writer. A Writer is not
// safe for concurrent use.
type Writer struct {
	w       io.Writer
	pending []byte // an incomplete UTF-8 sequence at the end of the last Write
}

// NewWriter returns a Writer that escapes into w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write escapes p and writes it. It reports len(p) on success, whatever
// the escaped length.
func (w *Writer) Write(p []byte) (int, error) {
	buf := p
	if len(w.pending) > 0 {
		buf = append(w.pending, p...)
		w.pending = nil
	}
	// Hold back a trailing incomplete (but so far valid) UTF-8 sequence.
	cut := len(buf)
	for back := 1; back <= utf8.UTFMax-1 && back <= len(buf); back++ {
		c := buf[len(buf)-back]
		if c < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-back:]) {
				cut = len(buf) - back
			}
			break
		}
	}
	if cut < len(buf) {
		w.pending = append([]byte(nil), buf[cut:]...)
	}
	if cut > 0 {
		if _, err := io.WriteString(w.w, escape(string(buf[:cut]), false)); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Close writes out an incomplete trailing sequence, escaped.
func (w *Writer) Close() error {
	if len(w.pending) == 0 {
		return nil
	}
	s := escape(string(w.pending), false)
	w.pending = nil
	_, err := io.WriteString(w.w, s)
	return err
}
