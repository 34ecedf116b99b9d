package sfrules_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// keyFiles are the files people give as the JWT key, each as openssl or a
// certificate tool writes it.
func keyFiles(t *testing.T) map[string][]byte {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecPKCS8, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecSEC1, _ := x509.MarshalECPrivateKey(ec)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	edPKCS8, _ := x509.MarshalPKCS8PrivateKey(ed)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sf2loki"},
		NotBefore: time.Unix(1700000000, 0), NotAfter: time.Unix(1800000000, 0)}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	enc := pem.EncodeToMemory
	return map[string][]byte{
		"rsa pkcs8": rsaPEM,
		"rsa pkcs1": enc(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}),
		// openssl req -x509 -newkey ... writes the certificate; people
		// give it instead of the -keyout file.
		"certificate": enc(&pem.Block{Type: "CERTIFICATE", Bytes: cert}),
		// openssl ecparam -genkey writes the parameters first.
		"ec sec1":    append(enc(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}}), enc(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecSEC1})...),
		"ec pkcs8":   enc(&pem.Block{Type: "PRIVATE KEY", Bytes: ecPKCS8}),
		"ed25519":    enc(&pem.Block{Type: "PRIVATE KEY", Bytes: edPKCS8}),
		"public key": enc(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		// openssl genpkey -aes256 (PKCS#8) and openssl genrsa -des3 (the
		// legacy PEM encryption): the bodies are never decrypted.
		"encrypted pkcs8": enc(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("0123456789abcdef0123456789abcdef")}),
		"encrypted legacy": enc(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "DES-EDE3-CBC,0123456789ABCDEF"},
			Bytes: []byte("0123456789abcdef0123456789abcdef")}),
		"not pem": []byte("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"),
		"openssh": enc(&pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: []byte("openssh-key-v1\x00")}),
		// A bundle: the certificate, then its key.
		"certificate then key": append(enc(&pem.Block{Type: "CERTIFICATE", Bytes: cert}), rsaPEM...),
	}
}

// TestParsePrivateKeyNamesWhatItGot: every kind of file that is not an
// unencrypted RSA private key gets one sentence saying what it is and
// what to do, never quoting the key.
func TestParsePrivateKeyNamesWhatItGot(t *testing.T) {
	files := keyFiles(t)
	for name, want := range map[string]string{
		"rsa pkcs8":            "",
		"rsa pkcs1":            "",
		"certificate then key": "",
		"certificate":          "holds a certificate, not a private key: the certificate goes to the app in Salesforce, sf2loki needs its private key; give the private key file made with the certificate",
		"ec sec1":              "is an EC (ECDSA) key; Salesforce's JWT bearer flow signs with RS256, which needs an RSA key: make an RSA key and its certificate (openssl req -x509 -newkey rsa:2048",
		"ec pkcs8":             "is an EC (ECDSA) key; Salesforce's JWT bearer flow signs with RS256",
		"ed25519":              "is an Ed25519 key; Salesforce's JWT bearer flow signs with RS256",
		"public key":           "holds a public key, not a private key",
		"encrypted pkcs8":      "is encrypted with a passphrase (ENCRYPTED PRIVATE KEY, PKCS#8), which sf2loki cannot ask for: decrypt it into a new file (openssl pkey -in <key> -out <new key>",
		"encrypted legacy":     "is encrypted with a passphrase (Proc-Type: 4,ENCRYPTED), which sf2loki cannot ask for: decrypt it",
		"not pem":              "is not a PEM private key (no -----BEGIN PRIVATE KEY----- or -----BEGIN RSA PRIVATE KEY----- line)",
		"openssh":              "is an OpenSSH private key: convert an RSA one to PEM (ssh-keygen -p -m PEM",
	} {
		t.Run(name, func(t *testing.T) {
			k, err := sfrules.ParsePrivateKey(files[name])
			if want == "" {
				if err != nil || k == nil {
					t.Fatalf("an RSA key refused: %v", err)
				}
				return
			}
			var ke *sfrules.KeyError
			if k != nil || !errors.As(err, &ke) || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("got %v, %v; want a *KeyError starting %q", k, err, want)
			}
			for line := range strings.Lines(string(files[name])) {
				// The body's lines, not the header lines (Proc-Type: ...).
				if line = strings.TrimSpace(line); len(line) > 16 && !strings.HasPrefix(line, "-----") && !strings.Contains(line, ": ") &&
					strings.Contains(err.Error(), line) {
					t.Fatalf("the error quotes the key: %v", err)
				}
			}
		})
	}
}
