package digest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestDigest(t *testing.T) {
	big := bytes.Repeat([]byte("dal"), 200_000) // longer than a copy buffer
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		// sha256sum of the same bytes.
		{"empty", nil, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", []byte("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"600 KB", big, Bytes(big)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Bytes(tc.in); got != tc.want {
				t.Errorf("Bytes = %s, want %s", got, tc.want)
			}
			got, n, err := Reader(iotest.OneByteReader(bytes.NewReader(tc.in[:min(len(tc.in), 4096)])))
			if want := Bytes(tc.in[:min(len(tc.in), 4096)]); err != nil || got != want || n != int64(min(len(tc.in), 4096)) {
				t.Errorf("Reader = %s, %d, %v; want %s", got, n, err, want)
			}
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, tc.in, 0o600); err != nil {
				t.Fatal(err)
			}
			got, n, err = File(p)
			if err != nil || got != tc.want || n != int64(len(tc.in)) {
				t.Errorf("File = %s, %d, %v; want %s, %d", got, n, err, tc.want, len(tc.in))
			}
		})
	}
	if _, _, err := File(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("File of a missing path: %v", err)
	}
	boom := errors.New("boom")
	if d, _, err := Reader(iotest.ErrReader(boom)); !errors.Is(err, boom) || d != "" {
		t.Errorf("Reader of a failing reader = %q, %v", d, err)
	}
	if !strings.HasPrefix(Bytes(nil), Prefix) {
		t.Error("a digest does not start with Prefix")
	}
}
