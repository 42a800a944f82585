package ebpf

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

// parseStraceSummary reads the table `strace -c` writes: calls per syscall.
func parseStraceSummary(r io.Reader) (map[string]uint64, error) {
	counts := map[string]uint64{}
	sc := bufio.NewScanner(r)
	rules := 0
	var total uint64
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "------") {
			rules++
			continue
		}
		f := strings.Fields(line)
		if rules == 0 || len(f) < 5 {
			continue
		}
		calls, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("strace summary: calls in %q: %w", line, err)
		}
		name := f[len(f)-1]
		if rules == 2 {
			if name != "total" {
				return nil, fmt.Errorf("strace summary: %q after the table", line)
			}
			total = calls
			continue
		}
		counts[name] += calls
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if rules != 2 {
		return nil, fmt.Errorf("strace summary: no table")
	}
	var sum uint64
	for _, n := range counts {
		sum += n
	}
	if sum != total {
		return nil, fmt.Errorf("strace summary: rows add up to %d, total says %d", sum, total)
	}
	return counts, nil
}

func TestParseStraceSummary(t *testing.T) {
	tests := []struct {
		file string
		want map[string]uint64 // a few rows
		rows int
	}{
		{"testdata/strace-dd.txt", map[string]uint64{"read": 1003, "write": 1003, "openat": 35, "execve": 1, "access": 1}, 22},
		{"testdata/strace-python.txt", map[string]uint64{"clock_nanosleep": 100, "newfstatat": 499, "getegid": 1}, 38},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := parseStraceSummary(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.rows {
				t.Errorf("%d rows, want %d", len(got), tc.rows)
			}
			for name, n := range tc.want {
				if got[name] != n {
					t.Errorf("%s: %d calls, want %d", name, got[name], n)
				}
			}
		})
	}
	if _, err := parseStraceSummary(strings.NewReader("dd: error\n")); err == nil {
		t.Error("a file without a table parsed")
	}
}
