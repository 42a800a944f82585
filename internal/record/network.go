package record

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dal-runtime/dal/bundle"
	"github.com/dal-runtime/dal/internal/format/runenv"
	"github.com/dal-runtime/dal/internal/netcap"
	"github.com/dal-runtime/dal/internal/netcap/har"
	"github.com/dal-runtime/dal/internal/netcap/prompts"
	"github.com/dal-runtime/dal/internal/procnet"
	"github.com/dal-runtime/dal/internal/runner"
	"github.com/dal-runtime/dal/internal/sandbox"
	"github.com/dal-runtime/dal/internal/sysvirt"
	"golang.org/x/sys/unix"
)

// Inside the agent's network namespace, dal's proxy listens at a fixed
// address and its trust files sit at fixed paths, so the environment the
// agent sees is the same in record and replay.
const (
	proxyHost   = "127.0.0.1"
	proxyPort   = 3128
	trustTarget = "/tmp/.dal/trust.pem" // system roots + the user's + dal's CA
	caTarget    = "/tmp/.dal/ca.pem"    // dal's CA alone (NODE_EXTRA_CA_CERTS)
)

// NetworkOptions configure capture.
type NetworkOptions struct {
	RedactHeaders []string // more header names to redact
	RedactFields  []string // more query/body field names to redact
	// SecretValues are masked in every request's match key (secrets.go):
	// the kept secrets' values when recording, their placeholders (and
	// values the replay names) when replaying.
	SecretValues []string
	Speed        float64 // replay: 0 fast, 1 recorded timing
	// AllowLoopback are the --allow-loopback values: services on this
	// host (HOST:PORT) the agent may reach, mirrored into the sandbox when
	// on loopback. Record only; nothing else on the host is reachable.
	AllowLoopback []string
	// AllowAddress are the --allow-address values: addresses the proxy
	// refuses by default (link-local, cloud metadata, the networks
	// attached to this host) that it may connect to. Record only.
	AllowAddress []string
	// KeepEnv are the --keep-env names: a kept *_BASE_URL variable whose
	// host is loopback allows that address too. Record only.
	KeepEnv []string
	// Ordered hands the agent its responses in the delivery order
	// (netcap's order.go, docs/design.md §3.1): record's --order-responses,
	// and a replay of a recording that had it.
	Ordered bool
	// Before are called in order for every request before it is forwarded
	// or replayed (netcap.Config.Before); the first answer wins. The
	// policy gate, strict-mode LLM checks and automatic checkpoints hook
	// in here.
	Before []func(ctx context.Context, x *har.Exchange) *netcap.Answer
}

// NetworkEnv is env.json's network section (package runenv's).
type NetworkEnv = runenv.Network

// Network is the capture (or replay) side of one run: dal's proxy,
// listening inside the agent's network namespace, and what it saw.
type Network struct {
	opts     NetworkOptions
	env      NetworkEnv
	dir      string // staging for the trust files
	ca       *netcap.CA
	proxy    *netcap.Proxy
	redactor *har.Redactor
	index    *har.Index // replay only

	mu        sync.Mutex
	exchanges []*har.Exchange
	reports   []string
	misses    []*har.MissError // replay: requests the bundle could not answer
	log       io.Writer

	prompts []*prompts.Prompt // record: extracted by writeNetwork (netwrite.go)
	count   int               // record: exchanges written

	sandboxCfg *sandbox.Config // for the stall limit, read once the sandbox runs
}

// NewNetwork prepares capture (index == nil) or replay of index, with
// its trust files staged in dir. mirrored is the list of addresses to
// mirror in replay (the recorded ones); in record the allowed loopback
// addresses are mirrored (see allowed). The proxy serves once Configure's
// sandbox starts the agent; Finish stops it.
func NewNetwork(dir string, o NetworkOptions, index *har.Log, mirrored []string, log io.Writer) (*Network, error) {
	n := &Network{opts: o, dir: dir, log: log,
		redactor: har.NewRedactor(o.RedactHeaders, o.RedactFields).WithValues(o.SecretValues...)}
	n.env = NetworkEnv{Captured: true, RedactHeaders: o.RedactHeaders, RedactFields: o.RedactFields}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the network staging directory: %w", err)
	}
	ca, err := netcap.NewCA()
	if err != nil {
		return nil, err
	}
	n.ca = ca
	if err := ca.WriteTrustBundle(filepath.Join(dir, "trust.pem")); err != nil {
		return nil, err
	}
	if err := ca.WriteCAFile(filepath.Join(dir, "ca.pem")); err != nil {
		return nil, err
	}
	var (
		allow     []netip.AddrPort
		allowNets []netip.Prefix
	)
	if index == nil {
		if allow, mirrored, err = allowed(o, log); err != nil {
			return nil, err
		}
		for _, a := range allow {
			n.env.Allowed = append(n.env.Allowed, a.String())
		}
		for _, spec := range o.AllowAddress {
			aps, nets, err := netcap.ParseAllowAddress(context.Background(), spec)
			if err != nil {
				return nil, runner.UsageError{Err: err}
			}
			for _, ap := range aps {
				n.env.AllowedAddresses = append(n.env.AllowedAddresses, ap.String())
			}
			for _, p := range nets {
				n.env.AllowedAddresses = append(n.env.AllowedAddresses, p.String())
			}
			allow = append(allow, aps...)
			allowNets = append(allowNets, nets...)
		}
	}
	port := proxyPort
	for slices.Contains(mirrored, net.JoinHostPort(proxyHost, strconv.Itoa(port))) {
		port++
	}
	n.env.Proxy = net.JoinHostPort(proxyHost, strconv.Itoa(port))
	n.env.Mirrored = mirrored
	cfg := netcap.Config{CA: ca, Record: n.add, Report: n.report, Speed: o.Speed, Before: firstAnswer(o.Before)}
	if index != nil {
		n.index = har.NewIndex(index, n.redactor, nil)
		cfg.Source = n
	} else {
		roots, err := upstreamRoots()
		if err != nil {
			return nil, err
		}
		cfg.UpstreamRoots = roots
		cfg.Allow = allow
		cfg.AllowNets = allowNets
	}
	if n.proxy, err = netcap.New(cfg); err != nil {
		return nil, err
	}
	return n, nil
}

// firstAnswer chains hooks for netcap.Config.Before: the first answer
// wins; nil when there are none, so the proxy pays nothing.
func firstAnswer(hooks []func(context.Context, *har.Exchange) *netcap.Answer) func(context.Context, *har.Exchange) *netcap.Answer {
	if len(hooks) == 0 {
		return nil
	}
	return func(ctx context.Context, x *har.Exchange) *netcap.Answer {
		for _, h := range hooks {
			if a := h(ctx, x); a != nil {
				return a
			}
		}
		return nil
	}
}

// Vars are the variables the agent gets: proxy and trust settings.
func (n *Network) Vars() map[string]string {
	proxy := "http://" + n.env.Proxy
	return map[string]string{
		"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy,
		"ALL_PROXY": proxy, "all_proxy": proxy,
		"SSL_CERT_FILE": trustTarget, "REQUESTS_CA_BUNDLE": trustTarget, "CURL_CA_BUNDLE": trustTarget,
		"NODE_EXTRA_CA_CERTS": caTarget,
		"AWS_CA_BUNDLE":       trustTarget, "GIT_SSL_CAINFO": trustTarget, "PIP_CERT": trustTarget,
		// Node 24+ honours the proxy variables with this; older Node is
		// captured at the server's own loopback address instead.
		"NODE_USE_ENV_PROXY": "1",
	}
}

// Configure makes the sandbox's network private and its listeners dal's.
func (n *Network) Configure(cfg *sandbox.Config) {
	cfg.Network = true
	cfg.Settle = n.opts.Ordered
	n.sandboxCfg = cfg
	cfg.Mounts = append(cfg.Mounts,
		sandbox.Mount{Source: filepath.Join(n.dir, "trust.pem"), Target: trustTarget, ReadOnly: true},
		sandbox.Mount{Source: filepath.Join(n.dir, "ca.pem"), Target: caTarget, ReadOnly: true})
	prev := cfg.BeforeAgent
	cfg.BeforeAgent = func(c *sandbox.Cmd) error {
		if prev != nil {
			if err := prev(c); err != nil {
				return err
			}
		}
		return n.listen(c)
	}
}

// listen opens the proxy's listeners in the agent's namespace.
func (n *Network) listen(c *sandbox.Cmd) error {
	l, err := c.ListenIn(n.env.Proxy)
	if err != nil {
		return err
	}
	// The proxy watches its clients' sockets with sock_diag in their
	// namespace, which a rootless dal-exec cannot enter: the init makes
	// the socket there.
	diag, err := c.SocketIn(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_SOCK_DIAG)
	if err == nil {
		err = n.proxy.AdoptDiagSocket(diag)
		diag.Close()
	}
	if err != nil && n.log != nil {
		fmt.Fprintf(n.log, "dal: the agent's connections cannot be watched with sock_diag (%v): a streamed response may reach it in fewer reads than recorded\n", err)
	}
	if c.Settles() {
		patience := n.sandboxCfg.Virtual.StallLimit
		if patience <= 0 {
			patience = sysvirt.DefaultStallLimit
		}
		n.proxy.SetSettle(c.Settle, c.Owed, patience)
		n.env.Ordered = true
	}
	go n.proxy.Serve(l)
	for _, addr := range n.env.Mirrored {
		l, err := c.ListenIn(addr)
		if err != nil {
			return fmt.Errorf("mirror the host's %s into the sandbox: %w", addr, err)
		}
		go n.proxy.ServeTransparent(l, addr)
	}
	return nil
}

// Next serves a replayed request from the bundle and keeps the misses
// for the verdict.
func (n *Network) Next(req *har.Request) (*har.Served, error) {
	s, err := n.index.Next(req)
	var miss *har.MissError
	if errors.As(err, &miss) {
		n.mu.Lock()
		n.misses = append(n.misses, miss)
		n.mu.Unlock()
	}
	if s != nil && s.Notice != "" && n.log != nil {
		n.mu.Lock()
		fmt.Fprintf(n.log, "dal: %s\n", s.Notice)
		n.mu.Unlock()
	}
	return s, err
}

func (n *Network) add(x *har.Exchange) {
	n.mu.Lock()
	n.exchanges = append(n.exchanges, x)
	n.mu.Unlock()
}

func (n *Network) report(e netcap.Event) {
	n.mu.Lock()
	if e.Kind == netcap.KindRefused {
		if !slices.Contains(n.env.Refused, e.Addr) {
			n.env.Refused = append(n.env.Refused, e.Addr)
		}
	} else {
		n.reports = append(n.reports, e.Msg)
	}
	n.mu.Unlock()
	fmt.Fprintf(n.log, "dal: %s\n", e.Msg)
}

// Finish stops the proxy once the agent is gone: every exchange has been
// recorded when it returns. The exchanges come in request order.
func (n *Network) Finish(blocked []sandbox.BlockedConnect) []*har.Exchange {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.proxy.Shutdown(ctx)
	for _, b := range blocked {
		n.env.Blocked = append(n.env.Blocked, b.Addr)
		fmt.Fprintf(n.log, "dal: the agent tried to connect to %s directly (not through a proxy): blocked, nothing was sent\n", b.Addr)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.env.NotCaptured = append([]string(nil), n.reports...)
	n.env.OrderEscapes = n.proxy.OrderEscapes()
	if n.env.OrderEscapes > 0 {
		fmt.Fprintf(n.log, "dal: %d response(s) reached the agent before its processes settled (one kept running past the stall limit): the order of its concurrent responses was decided by latency\n", n.env.OrderEscapes)
	}
	sort.SliceStable(n.exchanges, func(i, j int) bool { return n.exchanges[i].Seq < n.exchanges[j].Seq })
	return n.exchanges
}

// Entries turns exchanges into redacted HAR entries.
func (n *Network) Entries(xs []*har.Exchange) ([]har.Entry, error) {
	out := make([]har.Entry, 0, len(xs))
	for _, x := range xs {
		e, err := har.FromExchange(x, n.redactor)
		if err != nil {
			return nil, fmt.Errorf("network exchange %d (%s %s): %w", x.Seq, x.Request.Method, x.Request.URL, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Misses are the requests a replay could not answer from the bundle, in
// the order they came.
func (n *Network) Misses() []*har.MissError {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*har.MissError(nil), n.misses...)
}

// Key is the match key of req as the replay's index computes it
// (redacted, with the recorded key headers).
func (n *Network) Key(req *har.Request, keyHeaders []string) string {
	return n.redactor.Key(req, keyHeaders)
}

// ExtractPrompts finds the LLM calls among the entries.
func ExtractPrompts(es []har.Entry) []*prompts.Prompt {
	var ps []*prompts.Prompt
	for i := range es {
		if p, ok := prompts.Extract(&es[i]); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// allowed works out the host addresses the recording proxy may connect
// to (--allow-loopback, and the loopback address of a kept *_BASE_URL
// variable) and those to mirror into the sandbox at the same address:
// the loopback ones. "localhost:PORT" allows 127.0.0.1 and ::1, and
// mirrors ::1 only where the host listens there when the run starts, so
// that a client trying ::1 first falls back to 127.0.0.1 as it would
// without dal. Nothing is mirrored that the user did not name.
func allowed(o NetworkOptions, log io.Writer) (allow []netip.AddrPort, mirrored []string, err error) {
	type named struct{ spec, why string }
	var specs []named
	for _, a := range o.AllowLoopback {
		specs = append(specs, named{a, ""})
	}
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		if !strings.HasSuffix(name, "_BASE_URL") || !kept(name, o.KeepEnv) {
			continue
		}
		if hp, ok := loopbackBase(val); ok {
			specs = append(specs, named{hp, name})
		}
	}
	seen := map[netip.AddrPort]bool{}
	mirror := map[string]bool{}
	for _, sp := range specs {
		aps, err := netcap.ParseAllow(sp.spec)
		if err != nil {
			if sp.why != "" {
				continue // a convenience, never an error
			}
			return nil, nil, runner.UsageError{Err: err}
		}
		host, _, _ := net.SplitHostPort(sp.spec)
		for _, ap := range aps {
			if seen[ap] {
				continue
			}
			seen[ap] = true
			allow = append(allow, ap)
			if sp.why != "" {
				fmt.Fprintf(log, "dal: the agent may reach %s on this host: %s, kept with --keep-env, names it\n", ap, sp.why)
			}
			if !ap.Addr().IsLoopback() {
				continue // reachable through the proxy only
			}
			if strings.EqualFold(host, "localhost") && ap.Addr().Is6() && !hostListens(ap) {
				continue
			}
			mirror[ap.String()] = true
		}
	}
	mirrored = make([]string, 0, len(mirror))
	for a := range mirror {
		mirrored = append(mirrored, a)
	}
	sort.Strings(mirrored)
	return allow, mirrored, nil
}

// kept reports whether --keep-env patterns (NAME or PREFIX_*) keep name.
func kept(name string, patterns []string) bool {
	for _, k := range patterns {
		if k == name || (strings.HasSuffix(k, "*") && strings.HasPrefix(name, strings.TrimSuffix(k, "*"))) {
			return true
		}
	}
	return false
}

// loopbackBase returns the HOST:PORT of a base URL whose host is
// loopback (an IP or localhost).
func loopbackBase(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", false
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); (err != nil || !a.IsLoopback()) && !strings.EqualFold(host, "localhost") {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(host, port), true
}

// hostListens reports whether a TCP socket on this host listens where a
// connection to ap would arrive (ap's address, or the unspecified one of
// its family).
func hostListens(ap netip.AddrPort) bool {
	for _, sk := range procnet.TCP() {
		a := sk.Local.Addr()
		if sk.State == procnet.Listen && sk.Local.Port() == ap.Port() && a.Is4() == ap.Addr().Unmap().Is4() &&
			(a == ap.Addr().Unmap() || a.IsUnspecified()) {
			return true
		}
	}
	return false
}

// upstreamRoots are the CAs the proxy trusts upstream: the system's and
// those the user points clients at.
func upstreamRoots() (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	for _, v := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"} {
		p := os.Getenv(v)
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s=%s: %w", v, p, err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s=%s holds no PEM certificate", v, p)
		}
	}
	return pool, nil
}

// addPrompts fills the manifest's model and token figures from prompts/.
func addPrompts(m *bundle.Manifest, ps []*prompts.Prompt) {
	if len(ps) == 0 {
		return
	}
	in, out := prompts.Totals(ps)
	m.Metrics.TokensInput, m.Metrics.TokensOutput = int64(in), int64(out)
	last := ps[len(ps)-1]
	if last.Model != "" {
		m.Config.Model = bundle.Model{ID: last.Model, Provider: last.Provider}
	}
}
