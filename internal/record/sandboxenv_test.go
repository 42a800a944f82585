package record

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dal-runtime/dal/internal/sandbox"
)

// The sandbox's view of dal's own variables is fixed; the token moves to
// a 0400 file in staging, and the file is made anew, not through a link
// planted where it goes.
func TestSandboxEnv(t *testing.T) {
	t.Parallel()
	staging := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, []byte("keep"), 0o600)
	os.Symlink(outside, filepath.Join(staging, "session-token")) // planted
	cfg := sandbox.Config{Staging: staging, PrivateTmp: true}
	env := []string{"A=1", "DAL_SOCKET=/tmp/dal-run-x/dald.sock", "DAL_SESSION=0000000000000001",
		"DAL_SESSION_TOKEN=s3cr3t", "AGENT_CLOCK_FILE=/tmp/dal-run-x/clock.json", "Z=2"}
	got, err := sandboxEnv(env, &cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=1", "DAL_SOCKET=/run/dal/dald.sock", "DAL_SESSION=0000000000000001",
		"AGENT_CLOCK_FILE=/run/dal/clock.json", "Z=2", "DAL_SESSION_TOKEN_FILE=/run/dal/session-token"}
	if !slices.Equal(got, want) {
		t.Errorf("env\n got %q\nwant %q", got, want)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("the token went through the planted link: %q", b)
	}
	tok := filepath.Join(staging, "session-token")
	fi, err := os.Lstat(tok)
	if err != nil || fi.Mode() != 0o400 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(tok); string(b) != "s3cr3t\n" {
		t.Errorf("token file holds %q", b)
	}
	if !slices.Equal(cfg.SocketsAt, []sandbox.Mount{{Source: "/tmp/dal-run-x/dald.sock", Target: "/run/dal/dald.sock"}}) ||
		!slices.Equal(cfg.Mounts, []sandbox.Mount{{Source: tok, Target: "/run/dal/session-token", ReadOnly: true}}) {
		t.Errorf("sandbox: SocketsAt %+v, Mounts %+v", cfg.SocketsAt, cfg.Mounts)
	}

	// The user's own clock log path stays; without a private /run nothing moves.
	cfg = sandbox.Config{Staging: t.TempDir()}
	got, err = sandboxEnv(env, &cfg, true)
	if err != nil || !slices.Equal(got, env) || !slices.Equal(cfg.Sockets, []string{"/tmp/dal-run-x/dald.sock"}) {
		t.Errorf("without a private /run: %q %v, Sockets %q", got, err, cfg.Sockets)
	}
}
