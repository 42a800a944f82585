package termsafe

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"plain", "hello, world\n", "hello, world\n"},
		{"tab and newline kept", "a\tb\nc", "a\tb\nc"},
		{"unicode kept", "café ✓ 日本 \\x1b", "café ✓ 日本 \\x1b"},
		{"OSC 52 clipboard write", "\x1b]52;c;ZWNobyBwd25lZA==\x07", `\x1b]52;c;ZWNobyBwd25lZA==\x07`},
		{"title change", "\x1b]0;owned\x1b\\", `\x1b]0;owned\x1b\`},
		{"CSI cursor up and erase", "ok\x1b[1A\x1b[2K", `ok\x1b[1A\x1b[2K`},
		{"carriage return overwrite", "rm -rf /\rls", `rm -rf /\rls`},
		{"NUL and DEL", "a\x00b\x7f", `a\x00b\x7f`},
		{"C1 CSI as a character", "a\u009b31mred", `a\u009b31mred`},
		{"C1 OSC as a character", "\u009d0;t\u009c", `\u009d0;t\u009c`},
		{"raw C1 byte (invalid UTF-8)", "a\x9bb", `a\x9bb`},
		{"right-to-left override", "user\u202etxt.exe", `user\u202etxt.exe`},
		{"isolates", "\u2066a\u2069", `\u2066a\u2069`},
		{"marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"invalid UTF-8", "\xff\xfeok", `\xff\xfeok`},
		{"truncated sequence", "é\xc3", "é\\xc3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := String(c.in); got != c.want {
				t.Fatalf("String(%q) = %q, want %q", c.in, got, c.want)
			}
			if got := string(Bytes([]byte(c.in))); got != c.want {
				t.Fatalf("Bytes(%q) = %q, want %q", c.in, got, c.want)
			}
			var buf bytes.Buffer
			w := NewWriter(&buf)
			for i := 0; i < len(c.in); i++ { // byte by byte: sequences split across writes
				if n, err := w.Write([]byte{c.in[i]}); n != 1 || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if buf.String() != c.want {
				t.Fatalf("Writer(%q) = %q, want %q", c.in, buf.String(), c.want)
			}
		})
	}
}

func TestLine(t *testing.T) {
	t.Parallel()
	if got, want := Line("a\nb\tc\x1b"), `a\nb\tc\x1b`; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
}

// FuzzString: whatever the input, the output holds no byte or
// character a terminal would act on, and is valid UTF-8.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "a\x1b]52;c;x\x07", "\u202e", "\xc3", "\u009b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{String(s), Line(s)} {
			if !utf8.ValidString(out) {
				t.Fatalf("%q: invalid UTF-8 out: %q", s, out)
			}
			for _, r := range out {
				if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || unsafeRune(r)) {
					t.Fatalf("%q: %U leaked in %q", s, r, out)
				}
			}
		}
		if strings.ContainsAny(Line(s), "\n\t") {
			t.Fatalf("Line(%q) has a newline or tab", s)
		}
		if clean(s, false) == len(s) && String(s) != s {
			t.Fatalf("clean input %q changed", s)
		}
	})
}

func TestCleanDoesNotAllocate(t *testing.T) {
	s := strings.Repeat("a clean log line, café ✓\n", 100)
	if n := testing.AllocsPerRun(100, func() { _ = String(s) }); n != 0 {
		t.Fatalf("String of clean text allocated %v times", n)
	}
}

func BenchmarkString(b *testing.B) {
	clean := strings.Repeat("a clean log line, café ✓\n", 1000)
	dirty := strings.Repeat("a \x1b[31mred\x1b[0m line\n", 1000)
	b.Run("clean", func(b *testing.B) {
		b.SetBytes(int64(len(clean)))
		for b.Loop() {
			_ = String(clean)
		}
	})
	b.Run("escaped", func(b *testing.B) {
		b.SetBytes(int64(len(dirty)))
		for b.Loop() {
			_ = String(dirty)
		}
	})
}
