package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestWorkspaceViewRepeats: what ls -la shows of the workspace, its files
// from before the run and its parent — times and inode numbers — is the
// same in every recording and in the replay. The workspace's parent on
// the sandbox's private /tmp was made a moment before the agent started,
// often in the same clock tick, and showed another time from run to run;
// the workspace itself showed the inode of each run's fresh overlay upper
// directory.
func TestWorkspaceViewRepeats(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	var first string
	var bundles []string
	for i := range 5 {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("b%d", i))
		r := dalExec(t, nil, "record", "--no-apply", "--workspace", ws, "--out", out, "--", "sh", "-c", "ls -la --full-time --inode; touch new; ls -la --full-time --inode")
		if r.code != 0 {
			t.Fatalf("record %d: exit %d\n%s", i, r.code, r.stderr)
		}
		if i == 0 {
			first = r.stdout
		} else if r.stdout != first {
			t.Errorf("recording %d showed\n%s\nrecording 0\n%s", i, r.stdout, first)
		}
		bundles = append(bundles, out)
	}
	for i, b := range bundles[:2] {
		if r := dalExec(t, nil, "replay", "--workspace", ws, b); r.code != 0 {
			t.Errorf("replay of recording %d: exit %d\n%s\n%s", i, r.code, r.stdout, r.stderr)
		}
	}
}
