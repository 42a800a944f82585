package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io/fs"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	apiKey    = "sk-e2e-SECRET-5f0c3a9d"
	cookieVal = "COOKIE-e2e-7d1b44"
)

// llmServer is testdata/llm_server.py, a local OpenAI-compatible server.
type llmServer struct {
	port int
	ca   string // PEM file of its certificate authority ("" over HTTP)
	cmd  *exec.Cmd
}

func startLLMServer(t *testing.T, tls bool) *llmServer {
	t.Helper()
	s := &llmServer{}
	args := []string{"testdata/llm_server.py", "--key-value", apiKey, "--cookie", cookieVal}
	if tls {
		dir := t.TempDir()
		s.ca = filepath.Join(dir, "ca.pem")
		writeServerCert(t, s.ca, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
		args = append(args, "--cert", filepath.Join(dir, "cert.pem"), "--key", filepath.Join(dir, "key.pem"))
	}
	s.cmd = exec.Command("python3", args...)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the test LLM server did not start: %v", err)
	}
	if s.port, err = strconv.Atoi(strings.TrimSpace(line)); err != nil {
		t.Fatalf("the test LLM server printed %q", line)
	}
	return s
}

func (s *llmServer) stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

func (s *llmServer) base() string {
	scheme := "http"
	if s.ca != "" {
		scheme = "https"
	}
	return scheme + "://127.0.0.1:" + itoa(s.port) + "/v1"
}

// writeServerCert writes a CA and a certificate for 127.0.0.1 signed by it.
func writeServerCert(t *testing.T, caPath, certPath, keyPath string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dal e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(key)
	for p, blk := range map[string]*pem.Block{caPath: {Type: "CERTIFICATE", Bytes: caDER},
		certPath: {Type: "CERTIFICATE", Bytes: der}, keyPath: {Type: "PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(p, pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// silentListener listens where the stopped server was and counts the
// connections it gets: a replay must make none.
func silentListener(t *testing.T, port int) *atomic.Int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:"+itoa(port))
	if err != nil {
		t.Fatalf("reopen the server's port: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}

// grepTree reports the files under dir that contain s.
func grepTree(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), s) {
				hits = append(hits, p)
			}
		}
		return nil
	})
	return hits
}

// TestNetworkRecordReplay is the acceptance of network capture: real
// clients (urllib, httpx, the openai npm SDK) against a local
// OpenAI-compatible server, over HTTP and HTTPS; recorded; the server
// stopped; replayed offline with identical output and nothing live.
func TestNetworkRecordReplay(t *testing.T) {
	t.Parallel()
	// The agents run in their own directory as the workspace: the sandbox
	// shows the workspace and a read-only rest of the tree, but a private
	// /tmp, where a checkout may live.
	testdata, _ := filepath.Abs("testdata")
	nodeDir := filepath.Join(testdata, "node-openai")
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "openai")); err != nil {
		t.Fatal("the openai npm package is not installed: run make test (it runs npm ci in e2e/testdata/node-openai)")
	}
	for _, tc := range []struct {
		name string
		tls  bool
		ws   string
		argv []string
	}{
		{"urllib-http", false, testdata, []string{"python3", "llm_agent_urllib.py"}},
		{"urllib-https", true, testdata, []string{"python3", "llm_agent_urllib.py"}},
		{"httpx-http", false, testdata, []string{"/usr/bin/python3", "llm_agent_httpx.py"}},
		{"httpx-https", true, testdata, []string{"/usr/bin/python3", "llm_agent_httpx.py"}},
		{"openai-node-http", false, nodeDir, []string{"node", "agent.js"}},
		{"openai-node-https", true, nodeDir, []string{"node", "agent.js"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startLLMServer(t, tc.tls)
			ws := tc.ws
			out := filepath.Join(t.TempDir(), "bundle")
			env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "OPENAI_API_KEY=" + apiKey, "LLM_BASE=" + srv.base()}
			keep := []string{"--keep-env", "OPENAI_API_KEY", "--keep-env", "LLM_BASE"}
			if tc.tls {
				// The agent trusts the server's CA as a user would; dal's
				// proxy trusts it upstream from the same variable.
				env = append(env, "SSL_CERT_FILE="+srv.ca, "NODE_EXTRA_CA_CERTS="+srv.ca)
			}
			args := append(append([]string{"record", "--out", out}, keep...), "--")
			rec := dalIn(t, ws, env, append(args, tc.argv...)...)
			if rec.code != 0 || !strings.Contains(rec.stdout, "stream: reply 2 to: stream please chunks:") ||
				!strings.Contains(rec.stdout, "again 2: reply 5 to: same") {
				t.Fatalf("record: exit %d\nstdout %s\nstderr %s", rec.code, rec.stdout, rec.stderr)
			}
			srv.stop()
			hits := silentListener(t, srv.port)

			rep := dalIn(t, ws, env, "replay", "--show-output", out)
			if rep.code != 0 || !strings.Contains(rep.stdout, "EXACT") {
				t.Fatalf("replay: exit %d\nstdout %s\nstderr %s", rep.code, rep.stdout, rep.stderr)
			}
			if rep.stdout[:strings.Index(rep.stdout, "replay of ")] != rec.stdout {
				t.Errorf("replayed output differs:\n%s\nrecorded:\n%s", rep.stdout, rec.stdout)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the stopped server's port got %d connections during replay", n)
			}
			for _, secret := range []string{apiKey, cookieVal} {
				if f := grepTree(t, out, secret); len(f) > 0 {
					t.Errorf("%q reached the bundle: %v", secret, f)
				}
			}
			var h struct {
				Log struct {
					Version string `json:"version"`
					Entries []struct {
						Dal struct {
							Chunks     []json.RawMessage `json:"chunks"`
							Redactions []string          `json:"redactions"`
						} `json:"_dal"`
					} `json:"entries"`
				} `json:"log"`
			}
			if err := json.Unmarshal(mustRead(t, filepath.Join(out, "network.har")), &h); err != nil || h.Log.Version != "1.2" || len(h.Log.Entries) != 5 {
				t.Fatalf("network.har: %v, version %q, %d entries", err, h.Log.Version, len(h.Log.Entries))
			}
			if len(h.Log.Entries[1].Dal.Chunks) < 5 || len(h.Log.Entries[0].Dal.Redactions) == 0 {
				t.Errorf("the stream has %d chunks, the first entry %d redactions", len(h.Log.Entries[1].Dal.Chunks), len(h.Log.Entries[0].Dal.Redactions))
			}
			ps, _ := filepath.Glob(filepath.Join(out, "prompts", "*.json"))
			if len(ps) != 5 {
				t.Errorf("prompts/ holds %d files, want 5", len(ps))
			}
			var m struct {
				Config  struct{ Model struct{ ID string } } `json:"config"`
				Metrics struct {
					In  int `json:"tokens_input"`
					Out int `json:"tokens_output"`
				} `json:"metrics"`
			}
			json.Unmarshal(mustRead(t, filepath.Join(out, "manifest.json")), &m)
			if m.Config.Model.ID != "test-model" || m.Metrics.In == 0 || m.Metrics.Out == 0 {
				t.Errorf("manifest model %q, tokens %d/%d", m.Config.Model.ID, m.Metrics.In, m.Metrics.Out)
			}
		})
	}
}

// TestNetworkReplayMiss: a request the recording cannot answer gets an
// error response; the replay exits 1 and names the nearest recorded
// request and the differing field.
func TestNetworkReplayMiss(t *testing.T) {
	t.Parallel()
	srv := startLLMServer(t, false)
	ws, _ := filepath.Abs("testdata")
	agent := "llm_agent_urllib.py"
	out := filepath.Join(t.TempDir(), "bundle")
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k"), "OPENAI_API_KEY=" + apiKey, "LLM_BASE=" + srv.base(), "PROMPT=hello"}
	keep := []string{"--keep-env", "OPENAI_API_KEY", "--keep-env", "LLM_BASE", "--keep-env", "PROMPT"}
	rec := dalIn(t, ws, env, append(append([]string{"record", "--out", out}, keep...), "--", "python3", agent)...)
	if rec.code != 0 {
		t.Fatalf("record: %d %s %s", rec.code, rec.stdout, rec.stderr)
	}
	srv.stop()
	env[len(env)-1] = "PROMPT=goodbye"
	rep := dalIn(t, ws, env, "replay", out)
	if rep.code != 1 || !strings.Contains(rep.stdout, "DRIFT  network") ||
		!strings.Contains(rep.stdout, "POST http://127.0.0.1:"+itoa(srv.port)+"/v1/chat/completions") ||
		!strings.Contains(rep.stdout, "$.messages[0].content") {
		t.Fatalf("replay: exit %d\nstdout %s\nstderr %s", rep.code, rep.stdout, rep.stderr)
	}
}

// TestNetworkBypassIsBlocked: a raw TCP connection to another machine,
// around the proxy, is blocked and reported in record and gets nothing
// live in replay.
func TestNetworkBypassIsBlocked(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	out := filepath.Join(t.TempDir(), "bundle")
	script := `import socket
try:
    socket.create_connection(("192.0.2.10", 80), timeout=5); print("connected")
except OSError as e:
    print("failed", type(e).__name__)
`
	env := []string{"DAL_KEY=" + filepath.Join(t.TempDir(), "k")}
	rec := dalIn(t, ws, env, "record", "--out", out, "--", "python3", "-c", script)
	if rec.code != 0 || strings.Contains(rec.stdout, "connected") || !strings.Contains(rec.stderr, "192.0.2.10:80") {
		t.Fatalf("record: %d %q %q", rec.code, rec.stdout, rec.stderr)
	}
	var e struct {
		Network struct{ Blocked []string } `json:"network"`
	}
	json.Unmarshal(mustRead(t, filepath.Join(out, "env.json")), &e)
	if len(e.Network.Blocked) != 1 || e.Network.Blocked[0] != "192.0.2.10:80" {
		t.Errorf("env.json network.blocked = %v", e.Network.Blocked)
	}
	rep := dalIn(t, ws, env, "replay", out)
	if rep.code != 0 {
		t.Fatalf("replay: %d %q %q", rep.code, rep.stdout, rep.stderr)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
