package salesforce_test

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// certificatePEM is the certificate openssl req -x509 -newkey ... writes
// beside the key: people give it instead of the -keyout file.
func certificatePEM(t *testing.T) []byte {
	t.Helper()
	rsaKey, _ := testenv.RSAKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sf2loki"},
		NotBefore: time.Unix(1700000000, 0), NotAfter: time.Unix(1800000000, 0)}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert})
}

// TestAnUnusableKeyIsAnInvalidConfiguration: what sfrules.ParsePrivateKey
// refuses reaches the caller as its *sfrules.KeyError, classified as
// domain.ErrInvalidConfig, from LoadSecret and from New alike.
func TestAnUnusableKeyIsAnInvalidConfiguration(t *testing.T) {
	_, loadErr := salesforce.LoadSecret("private_key", string(certificatePEM(t)), "")
	_, newErr := salesforce.New(salesforce.Config{AuthMode: sfrules.JWTBearer, LoginURL: "https://login.salesforce.com", ClientID: "ck",
		Username: "ops@acme.com", PrivateKeyPEM: []byte("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n")})
	for what, err := range map[string]error{"LoadSecret": loadErr, "New": newErr} {
		var ke *sfrules.KeyError
		if !errors.As(err, &ke) || !errors.Is(err, domain.ErrInvalidConfig) {
			t.Errorf("%s: got %v; want a *sfrules.KeyError that is domain.ErrInvalidConfig", what, err)
		}
	}
}

// TestLoadSecretNamesTheKeyFile: a key file that holds something else, or
// is missing, is named with what it is and what to do.
func TestLoadSecretNamesTheKeyFile(t *testing.T) {
	dir := t.TempDir()
	crt := filepath.Join(dir, "sf2loki.crt")
	if err := os.WriteFile(crt, certificatePEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := salesforce.LoadSecret("private_key", "", crt)
	if err == nil || !strings.HasPrefix(err.Error(), "salesforce: private_key_file "+crt+" holds a certificate, not a private key") {
		t.Fatalf("certificate: %v", err)
	}
	missing := filepath.Join(dir, "absent.key")
	_, err = salesforce.LoadSecret("private_key", "", missing)
	if err == nil || !errors.Is(err, os.ErrNotExist) ||
		!strings.HasPrefix(err.Error(), "salesforce: private_key_file "+missing+" does not exist: correct the path, or put the file there") ||
		strings.Count(err.Error(), missing) != 1 {
		t.Fatalf("missing: %v", err)
	}
	_, err = salesforce.LoadSecret("private_key", "", dir)
	if err == nil || !strings.Contains(err.Error(), dir+" is a directory, not a file") {
		t.Fatalf("directory: %v", err)
	}
}
