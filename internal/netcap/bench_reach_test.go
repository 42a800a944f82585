package netcap

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"
)

// BenchmarkConnectionGuarded is the proxy's cost per client connection
// through the guarded dialer (the one dal-exec record uses), the server
// allowed by address: a new client connection for every request, as an
// absolute-URL request and as HTTPS through a CONNECT tunnel (intercepted,
// its Host checked against the tunnel's target). Read it against the
// same benchmark on the parent commit.
func BenchmarkConnectionGuarded(b *testing.B) {
	plain := smallServer(b)
	secure := httptest.NewTLSServer(plain.Config.Handler)
	b.Cleanup(secure.Close)
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())
	allow := []netip.AddrPort{netip.MustParseAddrPort(plain.Listener.Addr().String()), netip.MustParseAddrPort(secure.Listener.Addr().String())}
	rg := newRig(b, Config{Allow: allow, UpstreamRoots: roots})
	rg.p.seq.record = nil // keep nothing
	proxy := rg.explicit()
	client := &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}),
		TLSClientConfig:   &tls.Config{RootCAs: caPool(rg.ca)},
		DisableKeepAlives: true,
	}}
	for _, tc := range []struct{ name, url string }{
		{"absolute", plain.URL + "/v1/models"},
		{"connect-https", secure.URL + "/v1/models"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := client.Get(tc.url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// BenchmarkHostCheck is what a request inside a tunnel adds to its
// handling: comparing its Host with the tunnel's target.
func BenchmarkHostCheck(b *testing.B) {
	for b.Loop() {
		if !sameAuthority("API.openai.com", "api.openai.com:443", "https") {
			b.Fatal("mismatch")
		}
	}
}
