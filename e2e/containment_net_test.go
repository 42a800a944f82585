package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// countingServer is a real HTTP server on addr that counts the requests
// it answers.
func countingServer(t *testing.T, addr string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		fmt.Fprintf(w, "hello from %s for %s", r.Context().Value(http.LocalAddrContextKey), r.Host)
	}))
	ts.Listener.Close()
	ts.Listener = l
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, &n
}

type harLog struct {
	Log struct {
		Entries []struct {
			Request struct {
				URL string `json:"url"`
			} `json:"request"`
			Response struct {
				Status int `json:"status"`
			} `json:"response"`
			ServerIPAddress string `json:"serverIPAddress"`
			Dal             struct {
				Refused     string `json:"refused"`
				Answered    string `json:"answered"`
				Destination string `json:"destination"`
				RemoteAddr  string `json:"remote_addr"`
			} `json:"_dal"`
		} `json:"entries"`
	} `json:"log"`
}

func readHAR(t *testing.T, bundle string) harLog {
	t.Helper()
	var h harLog
	if err := json.Unmarshal(mustRead(t, filepath.Join(bundle, "network.har")), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestNetworkConnectSmuggle (issue 38, item 1): an agent opens a CONNECT
// tunnel to one server and names api.openai.com in the Host header of the
// request inside it. The proxy answers 421 and forwards nothing; the
// policy (allow-llm-hosts.rego, which allows api.openai.com) is never
// asked; network.har records the tunnel's real server, not the Host. A
// request whose Host matches goes to the policy, which decides on the
// real destination (denied: not an LLM provider). Replay answers the same.
func TestNetworkConnectSmuggle(t *testing.T) {
	t.Parallel()
	ts, served := countingServer(t, "127.0.0.1:0")
	addr := strings.TrimPrefix(ts.URL, "http://")
	agent := `code() { curl -s -o /dev/null -w '%{http_code}' --max-time 20 -p "$@"; }
echo "smuggled=$(code -H 'Host: api.openai.com' "$URL/v1/models")"
echo "smuggled-port=$(code -H 'Host: api.openai.com:443' "$URL/v1/models")"
echo "honest=$(code "$URL/v1/models")"
`
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(agent), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "URL=" + ts.URL}
	out := filepath.Join(t.TempDir(), "bundle")
	rec := dalIn(t, ws, env, "record", "--no-apply", "--allow-loopback", addr, "--keep-env", "URL",
		"--policy", examplePolicy(t, "allow-llm-hosts.rego"), "--out", out, "--", "sh", "agent.sh")
	if want := "smuggled=421\nsmuggled-port=421\nhonest=403\n"; rec.code != 0 || rec.stdout != want {
		t.Fatalf("record: exit %d\nstdout %q\nwant   %q\nstderr %s", rec.code, rec.stdout, want, rec.stderr)
	}
	if n := served.Load(); n != 0 {
		t.Errorf("the server answered %d request(s); the smuggled ones must not reach it, the honest one is denied", n)
	}
	if !strings.Contains(rec.stderr, `a request inside a connection to `+addr+` named the server "api.openai.com" in its Host header: refused with 421 Misdirected Request`) {
		t.Errorf("dal's log does not name the misdirected request:\n%s", rec.stderr)
	}
	if !strings.Contains(rec.stderr, "policy denies http GET http://"+addr+"/v1/models (127.0.0.1 is not an LLM provider)") {
		t.Errorf("the policy did not decide on the real destination:\n%s", rec.stderr)
	}
	h := readHAR(t, out)
	if len(h.Log.Entries) != 3 {
		t.Fatalf("network.har has %d entries, want 3", len(h.Log.Entries))
	}
	for i, e := range h.Log.Entries {
		if e.Request.URL != "http://"+addr+"/v1/models" || e.Dal.Destination != addr {
			t.Errorf("entry %d: url %q destination %q, want the tunnel's server %s", i, e.Request.URL, e.Dal.Destination, addr)
		}
		if strings.Contains(e.Request.URL, "openai") {
			t.Errorf("entry %d names api.openai.com as where the request went: %s", i, e.Request.URL)
		}
	}
	for i, want := range []string{"api.openai.com", "api.openai.com:443"} {
		if e := h.Log.Entries[i]; e.Response.Status != 421 || e.Dal.Refused != want {
			t.Errorf("entry %d: status %d refused %q, want 421 refused %q", i, e.Response.Status, e.Dal.Refused, want)
		}
	}
	if e := h.Log.Entries[2]; e.Response.Status != 403 || e.Dal.Answered != "policy" {
		t.Errorf("honest entry: status %d answered %q, want the policy's 403", e.Response.Status, e.Dal.Answered)
	}
	var audit struct {
		Decisions []struct {
			Kind  string         `json:"kind"`
			Input map[string]any `json:"input"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "policy.json")), &audit); err != nil {
		t.Fatal(err)
	}
	var asked []map[string]any
	for _, d := range audit.Decisions {
		if d.Kind == "http" {
			asked = append(asked, d.Input)
		}
	}
	// The misdirected requests never reach the policy; the honest one
	// carries where it went.
	if len(asked) != 1 || fmt.Sprint(asked[0]["destination"]) != fmt.Sprint(map[string]any{"host": "127.0.0.1", "port": json.Number("")}) &&
		fmt.Sprint(asked[0]["destination"]) != fmt.Sprintf("map[host:127.0.0.1 port:%s]", strings.Split(addr, ":")[1]) {
		t.Errorf("policy.json's http decisions: %v, want one whose destination is %s", asked, addr)
	}
	if rep := dalIn(t, ws, env, "replay", out); rep.code != 0 {
		t.Errorf("replay: exit %d\n%s%s", rep.code, rep.stdout, rep.stderr)
	}

	// Without the policy, a request whose Host matches goes through.
	rec = dalIn(t, ws, env, "record", "--no-apply", "--allow-loopback", addr, "--keep-env", "URL", "--out", filepath.Join(t.TempDir(), "ok2"), "--",
		"curl", "-s", "-p", ts.URL+"/x")
	if rec.code != 0 || rec.stdout != "hello from "+addr+" for "+addr {
		t.Fatalf("record of an honest request: exit %d\nstdout %q\nstderr %s", rec.code, rec.stdout, rec.stderr)
	}
}

// TestNetworkSSRFRefused (issue 38, item 3): the proxy refuses a cloud
// metadata address (169.254.169.254, by address and as
// metadata.google.internal), a machine on a network attached to the host,
// and the host's own address on it: 403 naming the flag, a log line,
// env.json's refused list, and the servers see nothing. With
// --allow-address naming them, the first two answer; a bad value is
// refused with exit 2 before anything runs. The test runs the built
// dal-exec in network and mount namespaces of its own (the test binary
// runs itself again under unshare), where it gives lo those addresses
// and /etc/hosts the metadata name without disturbing the host.
func TestNetworkSSRFRefused(t *testing.T) {
	if os.Getenv("DAL_E2E_IN_NETNS") != "1" {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Fatal("creating network and mount namespaces needs root (CAP_SYS_ADMIN); the e2e network tests run as root")
		}
		hosts := filepath.Join(t.TempDir(), "hosts")
		if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n::1 localhost\n169.254.169.254 metadata.google.internal\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("unshare", "--net", "--mount", "--propagation", "private", "--", "sh", "-c",
			`mount --bind "$1" /etc/hosts && exec "$2" -test.run '^TestNetworkSSRFRefused$' -test.count 1 -test.v`, "sh", hosts, os.Args[0])
		cmd.Env = append(os.Environ(), "DAL_E2E_IN_NETNS=1", binDirEnv+"="+filepath.Dir(bin.exec))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestNetworkSSRFRefused") {
			t.Fatalf("in new network and mount namespaces: %v\n%s", err, out)
		}
		return
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", "10.9.0.1/24", "dev", "lo"}, // an attached network, all of it local on lo
		{"route", "add", "local", "169.254.169.254/32", "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	meta, metaN := countingServer(t, "169.254.169.254:0")
	nb, nbN := countingServer(t, "10.9.0.2:0")
	own, ownN := countingServer(t, "10.9.0.1:0")
	metaAddr, nbAddr, ownAddr := strings.TrimPrefix(meta.URL, "http://"), strings.TrimPrefix(nb.URL, "http://"), strings.TrimPrefix(own.URL, "http://")
	_, metaPort, _ := net.SplitHostPort(metaAddr)
	metaName := "http://metadata.google.internal:" + metaPort

	agent := `for u in "$META" "$META_NAME" "$NB" "$OWN"; do
  echo "$(curl -s --max-time 20 -w ' %{http_code}' "$u/computeMetadata/v1/")"
done
`
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "agent.sh"), []byte(agent), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "XDG_RUNTIME_DIR=" + t.TempDir(),
		"META=" + meta.URL, "META_NAME=" + metaName, "NB=" + nb.URL, "OWN=" + own.URL}
	keep := []string{"--keep-env", "META", "--keep-env", "META_NAME", "--keep-env", "NB", "--keep-env", "OWN"}
	refusal := func(addr, flag string) string {
		return `{"error":"dal: connection to ` + addr + ` refused: ` + flag + ` to allow it"}` + "\n"
	}
	linkLocal := "it is a link-local address, where cloud metadata services answer; pass --allow-address " + metaAddr
	want := refusal(metaAddr, linkLocal) + " 403\n" +
		refusal(metaAddr, linkLocal) + " 403\n" +
		refusal(nbAddr, "it is on 10.9.0.0/24, a network attached to this host (a bridge, a container or another namespace on it); pass --allow-address "+nbAddr+" (or --allow-address 10.9.0.0/24)") + " 403\n" +
		refusal(ownAddr, "pass --allow-loopback "+ownAddr) + " 403\n"
	out := filepath.Join(t.TempDir(), "refused")
	rec := dalIn(t, ws, env, append(append([]string{"record", "--no-apply", "--out", out}, keep...), "--", "sh", "agent.sh")...)
	if rec.code != 0 || rec.stdout != want {
		t.Fatalf("record: exit %d\nstdout %q\nwant   %q\nstderr %s", rec.code, rec.stdout, want, rec.stderr)
	}
	if !strings.Contains(rec.stderr, "dal: connection to "+metaAddr+" refused: "+linkLocal+" to allow it (the agent got 403)") {
		t.Errorf("dal's log does not name the refusal:\n%s", rec.stderr)
	}
	for name, n := range map[string]*atomic.Int32{"metadata": metaN, "neighbour": nbN, "own": ownN} {
		if c := n.Load(); c != 0 {
			t.Errorf("the %s server answered %d request(s)", name, c)
		}
	}
	var e struct {
		Network struct {
			Refused []string `json:"refused"`
		} `json:"network"`
	}
	json.Unmarshal(mustRead(t, filepath.Join(out, "env.json")), &e)
	if strings.Join(e.Network.Refused, ",") != strings.Join([]string{metaAddr, nbAddr, ownAddr}, ",") {
		t.Errorf("env.json refused %v", e.Network.Refused)
	}
	if rep := dalIn(t, ws, env, "replay", "--show-output", out); rep.code != 0 || !strings.HasPrefix(rep.stdout, want) {
		t.Errorf("replay: exit %d\nstdout %q\nstderr %s", rep.code, rep.stdout, rep.stderr)
	}

	allowed := filepath.Join(t.TempDir(), "allowed")
	rec = dalIn(t, ws, env, append(append([]string{"record", "--no-apply", "--out", allowed,
		"--allow-address", "169.254.169.254", "--allow-address", "10.9.0.0/24"}, keep...), "--", "sh", "agent.sh")...)
	want = "hello from " + metaAddr + " for " + metaAddr + " 200\n" +
		"hello from " + metaAddr + " for metadata.google.internal:" + metaPort + " 200\n" +
		"hello from " + nbAddr + " for " + nbAddr + " 200\n" +
		refusal(ownAddr, "pass --allow-loopback "+ownAddr) + " 403\n"
	if rec.code != 0 || rec.stdout != want {
		t.Fatalf("record with --allow-address: exit %d\nstdout %q\nwant   %q\nstderr %s", rec.code, rec.stdout, want, rec.stderr)
	}
	var e2 struct {
		Network struct {
			AllowedAddresses []string `json:"allowed_addresses"`
		} `json:"network"`
	}
	json.Unmarshal(mustRead(t, filepath.Join(allowed, "env.json")), &e2)
	if strings.Join(e2.Network.AllowedAddresses, ",") != "169.254.169.254/32,10.9.0.0/24" {
		t.Errorf("env.json allowed_addresses %v", e2.Network.AllowedAddresses)
	}
	h := readHAR(t, allowed)
	if len(h.Log.Entries) != 4 || h.Log.Entries[1].Dal.Destination != "metadata.google.internal:"+metaPort ||
		h.Log.Entries[1].Dal.RemoteAddr != metaAddr || h.Log.Entries[1].ServerIPAddress != "169.254.169.254" {
		t.Errorf("network.har does not record where the named request went: %+v", h.Log.Entries)
	}

	bad := filepath.Join(t.TempDir(), "bad")
	r := dalIn(t, ws, env, "record", "--no-apply", "--allow-address", "10.9.0.0/99", "--out", bad, "--", "true")
	if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, `--allow-address "10.9.0.0/99": want an address`) {
		t.Errorf("bad --allow-address: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a bundle was written for a refused --allow-address")
	}
}
