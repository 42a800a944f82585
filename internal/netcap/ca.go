package netcap

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// CA validity: every date an agent's clock may show. Under the syscall
// layer (package sysvirt) OpenSSL, Go and Node check certificates against
// the virtual clock, which starts at the session epoch (--epoch, any date)
// and jumps with every sleep. The CA's key exists only in this process's
// memory for one run, so a wide window gives nothing away.
var (
	caNotBefore = time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC)
	caNotAfter  = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// systemBundles are the files, in order, where [CA.WriteTrustBundle] looks
// for the system's root certificates (Debian/Ubuntu/Alpine, Fedora/RHEL,
// openSUSE, OpenELEC, CentOS/RHEL 7, macOS-like layouts).
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// CA is an ephemeral certificate authority that lives for one run: its key
// is generated in memory by [NewCA] and never written anywhere. It mints a
// leaf certificate per host name or IP address on demand and caches it.
// A CA is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	// leafKey is shared by every leaf: minting a leaf then costs one
	// signature, not a key generation.
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA generates a CA with an ECDSA P-256 key, valid from an hour ago for
// seven days.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("netcap: generate the CA key: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("netcap: generate the leaf key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   "dal ephemeral CA " + serial.Text(16)[:8],
			Organization: []string{"dal (per-run recording proxy)"},
		},
		NotBefore:             caNotBefore,
		NotAfter:              caNotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("netcap: create the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("netcap: parse the CA certificate: %w", err)
	}
	return &CA{
		cert:    cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:     key,
		leafKey: leafKey,
		leaves:  make(map[string]*tls.Certificate),
	}, nil
}

// CertPEM returns the CA certificate (never the key) in PEM form.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// Certificate returns the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Leaf returns a certificate for name, a DNS name or an IP address (as an
// IP SAN), signed by the CA; it is minted on first use and cached.
func (ca *CA) Leaf(name string) (*tls.Certificate, error) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" {
		return nil, errors.New("netcap: a leaf certificate needs a host name or an IP address")
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[name]; ok {
		return c, nil
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             ca.cert.NotBefore,
		NotAfter:              ca.cert.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("netcap: mint a certificate for %q: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("netcap: parse the certificate for %q: %w", name, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: ca.leafKey, Leaf: leaf}
	ca.leaves[name] = c
	return c, nil
}

// WriteTrustBundle writes to path a PEM bundle of the system's root
// certificates (the first that exists of /etc/ssl/certs/ca-certificates.crt and the other usual places), then extraPEM
// (the user's own SSL_CERT_FILE, REQUESTS_CA_BUNDLE, ...), then the CA: the
// file to point SSL_CERT_FILE, REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE at, so
// that an agent trusts both dal and everything it trusted before. It fails
// when no system bundle exists. The file is written atomically, mode 0644.
func (ca *CA) WriteTrustBundle(path string, extraPEM ...[]byte) error {
	return ca.writeTrustBundle(path, systemBundles, extraPEM)
}

func (ca *CA) writeTrustBundle(path string, system []string, extraPEM [][]byte) error {
	var roots []byte
	for _, f := range system {
		b, err := os.ReadFile(f)
		if err == nil && len(bytes.TrimSpace(b)) > 0 {
			roots = b
			break
		}
	}
	if roots == nil {
		return fmt.Errorf("netcap: no system CA bundle found (looked for %s): install the ca-certificates package", strings.Join(system, ", "))
	}
	var buf bytes.Buffer
	for _, part := range append(append([][]byte{roots}, extraPEM...), ca.certPEM) {
		if len(bytes.TrimSpace(part)) == 0 {
			continue
		}
		buf.Write(part)
		if !bytes.HasSuffix(part, []byte("\n")) {
			buf.WriteByte('\n')
		}
	}
	return writeFileAtomic(path, buf.Bytes())
}

// WriteCAFile writes the CA certificate alone to path (PEM, mode 0644,
// atomically): the file for NODE_EXTRA_CA_CERTS, which adds to Node's
// built-in roots rather than replacing them.
func (ca *CA) WriteCAFile(path string) error {
	return writeFileAtomic(path, ca.certPEM)
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".dal-ca-*")
	if err != nil {
		return fmt.Errorf("netcap: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("netcap: write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("netcap: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("netcap: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("netcap: write %s: %w", path, err)
	}
	return nil
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("netcap: draw a certificate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
