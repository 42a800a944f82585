package helptext

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWrapWords(t *testing.T) {
	for _, tc := range []struct {
		name               string
		words              []string
		col, indent, width int
		cont, want         string
		alone              bool
	}{
		{name: "fits", words: strings.Fields("a b c"), col: 3, indent: 3, width: 20, want: "a b c\n"},
		{name: "breaks before the word that passes the width",
			words: strings.Fields("aaaa bbbb cccc dddd"), col: 0, indent: 2, width: 11,
			want: "aaaa bbbb\n  cccc dddd\n"},
		{name: "a lone last word takes one from the line before",
			words: strings.Fields("aaaa bbbb cccc"), col: 0, indent: 0, width: 10,
			want: "aaaa\nbbbb cccc\n"},
		{name: "the move goes on up while it leaves one word alone",
			words: strings.Fields("aa bb cc dd ee ff gg"), col: 0, indent: 0, width: 8,
			want: "aa bb cc\ndd ee\nff gg\n"},
		{name: "words too long to pair are reported",
			words: []string{"aaaaaaaa", "bbbbbbbb"}, col: 0, indent: 0, width: 10,
			want: "aaaaaaaa\nbbbbbbbb\n", alone: true},
		{name: "a command breaks with a continuation counted in the width",
			words: shellWords("dal-exec record --out run1 -- python3 agent.py"), col: 3, indent: 7, width: 32, cont: " \\",
			want: "dal-exec record --out run1 \\\n       -- python3 agent.py\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, alone := wrapWords(tc.words, tc.col, tc.indent, tc.width, tc.cont)
			if got != tc.want || alone != tc.alone {
				t.Errorf("got %q (alone %v), want %q (alone %v)", got, alone, tc.want, tc.alone)
			}
		})
	}
}

func TestShellWordsKeepQuotesWhole(t *testing.T) {
	got := shellWords(`dal-exec consistency --verify 'test -s out.txt' --answer-json "$.a b" -- x`)
	want := []string{"dal-exec", "consistency", "--verify", "'test -s out.txt'", "--answer-json", `"$.a b"`, "--", "x"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestWidthNotATerminal checks the width of help written to a buffer, a
// pipe and a regular file: 80 columns.
func TestWidthNotATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.CreateTemp(t.TempDir(), "help")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, out := range map[string]any{"buffer": &bytes.Buffer{}, "pipe": w, "file": f} {
		if got := Width(out.(interface{ Write([]byte) (int, error) })); got != DefaultWidth {
			t.Errorf("Width(%s) = %d, want %d", name, got, DefaultWidth)
		}
	}
}

func TestProblems(t *testing.T) {
	text := "DESCRIPTION:\n   a paragraph that goes on\n   alone\n\nEXAMPLES:\n   # a comment\n   dald\n" + strings.Repeat("x", 81) + "\n"
	got := Problems(text, 80)
	if len(got) != 2 || !strings.Contains(got[0], `one word alone, "alone"`) || !strings.Contains(got[1], "81 columns wide") {
		t.Fatalf("Problems found %q", got)
	}
}

// TestWidthOfATerminal opens a real pseudo-terminal, sets its size and
// checks that help follows it, within [60, 120] columns.
func TestWidthOfATerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx (every Linux with devpts has it): %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	for _, tc := range []struct{ cols, want int }{{100, 100}, {80, 80}, {200, 120}, {40, 60}} {
		if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: uint16(tc.cols)}); err != nil {
			t.Fatal(err)
		}
		if got := Width(pts); got != tc.want {
			t.Errorf("a terminal %d columns wide: Width = %d, want %d", tc.cols, got, tc.want)
		}
	}
}
