package netcap

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCALeaves(t *testing.T) {
	t.Parallel()
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	cert := ca.Certificate()
	if !cert.IsCA || !cert.MaxPathLenZero {
		t.Errorf("CA certificate: IsCA=%v MaxPathLenZero=%v, want both", cert.IsCA, cert.MaxPathLenZero)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key is %T, want ECDSA P-256", cert.PublicKey)
	}
	now := time.Now()
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !cert.NotBefore.Before(now) || !cert.NotBefore.Before(epoch) || cert.NotAfter.Before(now.AddDate(100, 0, 0)) {
		t.Errorf("CA validity %v .. %v: want every date a virtual clock may show (the default epoch, now, a century on)", cert.NotBefore, cert.NotAfter)
	}
	block, _ := pem.Decode(ca.CertPEM())
	if block == nil || !bytes.Equal(block.Bytes, cert.Raw) {
		t.Error("CertPEM does not hold the CA certificate")
	}

	roots := caPool(ca)
	for _, tc := range []struct {
		name, verifyAs string
	}{
		{"api.example.com", "api.example.com"},
		{"API.Example.com.", "api.example.com"},
		{"127.0.0.1", "127.0.0.1"},
		{"::1", "::1"},
	} {
		leaf, err := ca.Leaf(tc.name)
		if err != nil {
			t.Fatalf("Leaf(%q): %v", tc.name, err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.verifyAs}); err != nil {
			t.Errorf("Leaf(%q) does not verify as %q: %v", tc.name, tc.verifyAs, err)
		}
		again, err := ca.Leaf(tc.verifyAs)
		if err != nil || again != leaf {
			t.Errorf("Leaf(%q) was not cached", tc.verifyAs)
		}
	}
	if _, err := ca.Leaf(""); err == nil {
		t.Error("Leaf(\"\") succeeded")
	}
	other, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := other.Leaf("api.example.com")
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "api.example.com"}); err == nil {
		t.Error("another run's CA is trusted: CAs are not per run")
	}
}

func TestTrustBundle(t *testing.T) {
	t.Parallel()
	ca := testCA(t)
	dir := t.TempDir()
	system := filepath.Join(dir, "system.pem")
	extraCA, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(system, other(t), 0o644); err != nil {
		t.Fatal(err)
	}

	bundle := filepath.Join(dir, "bundle.pem")
	if err := ca.writeTrustBundle(bundle, []string{filepath.Join(dir, "missing.pem"), system}, [][]byte{extraCA.CertPEM()}); err != nil {
		t.Fatal(err)
	}
	got := pemCerts(t, bundle)
	want := []string{"system root", extraCA.Certificate().Subject.CommonName, ca.Certificate().Subject.CommonName}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("bundle holds %q, want %q (system roots, extras, then the CA)", got, want)
	}
	if fi, err := os.Stat(bundle); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("bundle mode: %v %v, want 0644", fi.Mode(), err)
	}

	err = ca.writeTrustBundle(filepath.Join(dir, "none.pem"), []string{filepath.Join(dir, "missing.pem")}, nil)
	if err == nil || !strings.Contains(err.Error(), "no system CA bundle found") || !strings.Contains(err.Error(), "ca-certificates") {
		t.Errorf("without system roots: %v, want a clear error", err)
	}

	// The real system bundle of this machine.
	real := filepath.Join(dir, "real.pem")
	if err := ca.WriteTrustBundle(real); err != nil {
		t.Fatal(err)
	}
	if n := len(pemCerts(t, real)); n < 10 {
		t.Errorf("bundle from the system roots holds %d certificates", n)
	}

	caFile := filepath.Join(dir, "ca.pem")
	if err := ca.WriteCAFile(caFile); err != nil {
		t.Fatal(err)
	}
	if got := pemCerts(t, caFile); len(got) != 1 || got[0] != ca.Certificate().Subject.CommonName {
		t.Errorf("CA file holds %q, want the CA alone", got)
	}
	for _, f := range []string{bundle, real, caFile} {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Errorf("%s holds a private key", f)
		}
	}
}

// other returns a PEM certificate named "system root".
func other(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "system root"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// pemCerts lists the common names of the certificates in a PEM file.
func pemCerts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return names
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		names = append(names, c.Subject.CommonName)
	}
}
