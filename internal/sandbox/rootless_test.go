package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUserNamespacesSettings: each setting that forbids unprivileged user
// namespaces is named with the command that changes it; a kernel that
// allows them (or lacks the setting) passes.
func TestUserNamespacesSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		files map[string]string
		want  string // "" = allowed
	}{
		{map[string]string{}, ""},
		{map[string]string{"kernel/unprivileged_userns_clone": "1\n", "user/max_user_namespaces": "96365\n", "kernel/apparmor_restrict_unprivileged_userns": "0\n"}, ""},
		{map[string]string{"kernel/unprivileged_userns_clone": "0\n"}, "sudo sysctl -w kernel.unprivileged_userns_clone=1"},
		{map[string]string{"user/max_user_namespaces": "0\n"}, "sudo sysctl -w user.max_user_namespaces=10000"},
		{map[string]string{"kernel/apparmor_restrict_unprivileged_userns": "1\n"}, "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"},
	} {
		dir := t.TempDir()
		for name, v := range tc.files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := userNamespaces(dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.files, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%v: got %v, want one sentence with %q", tc.files, err, tc.want)
		}
	}
	// This machine allows them: the rootless suite runs here.
	if err := userNamespaces("/proc/sys"); err != nil {
		t.Fatalf("this machine forbids unprivileged user namespaces, which e2e/rootless_test.go needs: %v", err)
	}
}
