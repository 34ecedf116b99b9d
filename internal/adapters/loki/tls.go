package loki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// TLS configures the connection to an https URL. Files are read once, by
// New.
type TLS struct {
	// CAFile is a PEM bundle of the CAs that may sign the server's
	// certificate. It replaces the system roots (as curl --cacert and
	// Prometheus' ca_file do): only its CAs are trusted. "" trusts the
	// system roots.
	CAFile string
	// CertFile and KeyFile are the PEM client certificate (its chain may
	// follow it) and private key for mutual TLS: both or neither.
	CertFile string
	KeyFile  string
	// ServerName is the name the server's certificate must hold, also sent
	// as SNI; "" is the URL's host.
	ServerName string
	// InsecureSkipVerify accepts any server certificate: the connection is
	// encrypted but not authenticated.
	InsecureSkipVerify bool
}

// insecureWarning is logged at start when the server is not verified.
const insecureWarning = "sink.loki.tls.insecure_skip_verify is true: the Loki server's certificate is not verified, so anyone on the " +
	"network path can read and forge this connection (the entries and the credentials sent with them); set sink.loki.tls.ca_file instead"

// clientConfig reads the files and returns the client's TLS configuration:
// TLS 1.2 at least.
func (t TLS) clientConfig(now time.Time) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, warned at check and at start
	if t.CAFile != "" {
		pool, err := readCAs(t.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := readKeyPair(t.CertFile, t.KeyFile, now)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	case t.CertFile != "":
		return nil, errors.New("sink.loki.tls.key_file is required with cert_file (the client certificate's private key)")
	case t.KeyFile != "":
		return nil, errors.New("sink.loki.tls.cert_file is required with key_file (the client certificate)")
	}
	return c, nil
}

// readFile reads a file that key names.
func readFile(key, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sink.loki.tls.%s: cannot read %s: %w (the daemon's user must be able to read it)", key, path, unwrapPath(err))
	}
	return b, nil
}

// unwrapPath drops the *PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readCAs reads a PEM bundle of CA certificates.
func readCAs(path string) (*x509.CertPool, error) {
	b, err := readFile("ca_file", path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		n++
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("sink.loki.tls.ca_file %s: certificate %d is not valid: %w", path, n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, fmt.Errorf("sink.loki.tls.ca_file %s holds no PEM certificate (-----BEGIN CERTIFICATE----- blocks): it must be the CA bundle "+
			"that signed the Loki server's certificate", path)
	}
	return pool, nil
}

// readKeyPair reads the client certificate and its key.
func readKeyPair(certFile, keyFile string, now time.Time) (tls.Certificate, error) {
	certPEM, err := readFile("cert_file", certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readFile("key_file", keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	if !hasBlock(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return tls.Certificate{}, fmt.Errorf("sink.loki.tls.cert_file %s holds no PEM certificate (-----BEGIN CERTIFICATE-----)", certFile)
	}
	if !hasBlock(keyPEM, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }) {
		return tls.Certificate{}, fmt.Errorf("sink.loki.tls.key_file %s holds no PEM private key (-----BEGIN PRIVATE KEY-----, or an RSA or EC one)", keyFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("sink.loki.tls.cert_file %s and key_file %s are not a certificate and its private key: %w", certFile, keyFile, err)
	}
	if leaf := cert.Leaf; leaf != nil && now.After(leaf.NotAfter) {
		return tls.Certificate{}, fmt.Errorf("sink.loki.tls.cert_file %s: the client certificate expired on %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// hasBlock reports whether b holds a PEM block of a type ok accepts.
func hasBlock(b []byte, ok func(string) bool) bool {
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return false
		}
		if ok(block.Type) {
			return true
		}
	}
}

// newTransport is http.DefaultTransport's settings (HTTP_PROXY,
// HTTPS_PROXY and NO_PROXY honoured, HTTP/2, the idle and handshake
// timeouts) with t's TLS configuration.
func newTransport(t TLS, now time.Time) (*http.Transport, error) {
	c, err := t.clientConfig(now)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyFromEnvironment
	tr.TLSClientConfig = c
	return tr, nil
}

// tlsHint adds what to check to a push's TLS failure; other errors are
// returned as they are.
func (t TLS) tlsHint(err error) error {
	var (
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		hint    string
	)
	msg := err.Error()
	switch {
	case errors.As(err, &unknown) && t.CAFile != "":
		hint = "the Loki server's certificate is not signed by a CA of sink.loki.tls.ca_file " + t.CAFile
	case errors.As(err, &unknown):
		hint = "the Loki server's certificate is not signed by a CA this system trusts: set sink.loki.tls.ca_file to the CA bundle that signed it"
	case errors.As(err, &host) && t.ServerName != "":
		hint = "the Loki server's certificate does not hold sink.loki.tls.server_name " + t.ServerName
	case errors.As(err, &host):
		hint = "the Loki server's certificate does not hold the host of sink.loki.url: set sink.loki.tls.server_name to a name it holds"
	case errors.As(err, &invalid):
		hint = "the Loki server's certificate is expired, not yet valid or not for a server: check it (and this host's clock)"
	case strings.Contains(msg, "remote error: tls:") && t.CertFile == "":
		hint = "the Loki server refused the TLS handshake; it may require a client certificate: set sink.loki.tls.cert_file and key_file"
	case strings.Contains(msg, "remote error: tls:"):
		hint = "the Loki server refused the TLS handshake: check that it trusts the CA that signed sink.loki.tls.cert_file and that it speaks TLS 1.2 or later"
	case strings.Contains(msg, "protocol version"):
		hint = "the Loki server does not speak TLS 1.2 or later, which sf2loki requires"
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		hint = "the server speaks plain HTTP: use an http:// sink.loki.url"
	default:
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}
