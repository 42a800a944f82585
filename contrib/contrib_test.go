package contrib

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unit is a parsed systemd unit file: section -> key -> values in order
// (a key may repeat).
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is not KEY=VALUE inside a section", path, n, line)
			}
			u[section][key] = append(u[section][key], value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUnitSettings pins the settings the rest of dal relies on.
func TestUnitSettings(t *testing.T) {
	t.Parallel()
	service := parseUnit(t, filepath.Join("systemd", "dald.service"))
	socket := parseUnit(t, filepath.Join("systemd", "dald.socket"))
	tests := []struct {
		u       unit
		section string
		key     string
		want    string
		why     string
	}{
		{service, "Service", "Type", "notify", "dald sends READY=1"},
		{service, "Service", "ExecStart", "/usr/local/bin/dald", "the README installs it there"},
		{service, "Service", "Restart", "on-failure", ""},
		{service, "Service", "User", "root", "eBPF needs root"},
		{service, "Service", "RuntimeDirectory", "dal", "holds the socket"},
		{service, "Service", "RuntimeDirectoryPreserve", "yes", "the socket unit outlives the service"},
		{service, "Service", "CapabilityBoundingSet", "CAP_BPF CAP_PERFMON CAP_SYS_ADMIN", "eBPF and nothing else"},
		{service, "Service", "NoNewPrivileges", "yes", ""},
		{service, "Service", "ProtectSystem", "strict", ""},
		{service, "Service", "SystemCallFilter", "@system-service bpf perf_event_open", "the eBPF syscalls are outside @system-service"},
		{service, "Service", "LimitMEMLOCK", "infinity", "eBPF maps on kernels before 5.11"},
		{service, "Unit", "Requires", "dald.socket", ""},
		{socket, "Socket", "ListenStream", "/run/dal/dald.sock", "dal-exec's default socket for root"},
		{socket, "Socket", "SocketMode", "0600", "the daemon's peer check expects an owner-only socket"},
	}
	for _, tt := range tests {
		got := tt.u[tt.section][tt.key]
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("[%s] %s = %q, want %q (%s)", tt.section, tt.key, got, tt.want, tt.why)
		}
	}
	// The socket must live in the service's runtime directory.
	if dir := filepath.Dir(socket["Socket"]["ListenStream"][0]); dir != "/run/"+service["Service"]["RuntimeDirectory"][0] {
		t.Errorf("socket directory %s is not the service's RuntimeDirectory", dir)
	}
	for name, u := range map[string]unit{"dald.service": service, "dald.socket": socket} {
		if _, ok := u["Install"]; !ok {
			t.Errorf("%s lacks an [Install] section; systemctl enable would refuse it", name)
		}
	}
}

// stage copies the units into a temporary directory with ExecStart pointed
// at a binary that exists, since systemd-analyze verify checks it.
func stage(t *testing.T) (service, socket string) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"dald.service", "dald.socket"} {
		data, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.ReplaceAll(string(data), "ExecStart=/usr/local/bin/dald", "ExecStart=/usr/bin/true"))
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "dald.service"), filepath.Join(dir, "dald.socket")
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is not installed: apt-get install systemd (.ci/run does)")
	}
	return path
}

// TestUnitsVerify asks systemd itself: unknown keys, bad values and broken
// references are warnings on stderr, so any output fails.
func TestUnitsVerify(t *testing.T) {
	t.Parallel()
	bin := systemdAnalyze(t)
	service, socket := stage(t)
	out, err := exec.Command(bin, "verify", "--man=no", socket, service).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestUnitHardening keeps the service's exposure score at "OK" (3.0 or
// less on systemd-analyze's 10-point scale), so that loosening a setting
// does not go unnoticed.
func TestUnitHardening(t *testing.T) {
	t.Parallel()
	bin := systemdAnalyze(t)
	service, _ := stage(t)
	out, err := exec.Command(bin, "security", "--offline=yes", "--threshold=30", service).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security rates dald.service above 3.0: %v\n%s", err, out)
	}
}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: apt-get install prometheus")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = "prometheus"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestPrometheusConfig(t *testing.T) {
	t.Parallel()
	promtool(t, "check", "config", "prometheus.yml") // checks dal-alerts.yml too
}

func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool(t, "test", "rules", "dal-alerts.test.yml")
}
