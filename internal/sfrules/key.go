package sfrules

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
)

// KeyError says what a private key given for the JWT bearer flow is
// instead of an unencrypted RSA private key, and what to do. Its text
// continues a sentence naming the key ("salesforce.private_key_file
// /etc/sf2loki/key.pem " + Error()) and never quotes the key. (The
// Salesforce adapter's errors that carry one also unwrap to
// domain.ErrInvalidConfig.)
type KeyError struct{ Problem string }

func (e *KeyError) Error() string { return e.Problem }

// NewKeyCommand is the openssl command that makes an RSA key and the
// certificate to upload to the app (Salesforce's JWT bearer flow signs with
// RS256, "SHA256 with RSA").
const NewKeyCommand = "openssl req -x509 -newkey rsa:2048 -sha256 -days 730 -nodes -subj /CN=sf2loki -keyout sf2loki.key -out sf2loki.crt"

const (
	keyFix      = "give the private key file made with the certificate uploaded to the app (the -keyout file of openssl req)"
	newKeyFix   = "make an RSA key and its certificate (" + NewKeyCommand + "), upload sf2loki.crt to the app (Use digital signatures) and give sf2loki.key"
	decryptHint = "decrypt it into a new file (openssl pkey -in <key> -out <new key>, which asks for the passphrase) and give that file, readable only by sf2loki's user"
)

// ParsePrivateKey reads an unencrypted RSA key in PKCS#1 or PKCS#8 PEM.
// Anything else is a *KeyError saying what was given (a certificate, a
// public key, an EC key, an encrypted key, not PEM) and what to do.
func ParsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	var kinds []string
	for rest := pemBytes; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if k, err := parseKeyBlock(block); k != nil || err != nil {
			return k, err
		}
		kinds = append(kinds, block.Type)
	}
	switch {
	case len(kinds) == 0 && len(bytes.TrimSpace(pemBytes)) == 0:
		return nil, &KeyError{"is empty: " + keyFix}
	case len(kinds) == 0:
		return nil, &KeyError{"is not a PEM private key (no -----BEGIN PRIVATE KEY----- or -----BEGIN RSA PRIVATE KEY----- line): " + keyFix}
	case slices.Contains(kinds, "CERTIFICATE"):
		return nil, &KeyError{"holds a certificate, not a private key: the certificate goes to the app in Salesforce, sf2loki needs its private key; " + keyFix}
	case slices.Contains(kinds, "CERTIFICATE REQUEST") || slices.Contains(kinds, "NEW CERTIFICATE REQUEST"):
		return nil, &KeyError{"holds a certificate signing request, not a private key: " + keyFix}
	case slices.Contains(kinds, "PUBLIC KEY") || slices.Contains(kinds, "RSA PUBLIC KEY"):
		return nil, &KeyError{"holds a public key, not a private key: " + keyFix}
	case slices.Contains(kinds, "OPENSSH PRIVATE KEY"):
		return nil, &KeyError{"is an OpenSSH private key: convert an RSA one to PEM (ssh-keygen -p -m PEM -f <a copy of the key>), or " + newKeyFix}
	}
	return nil, &KeyError{fmt.Sprintf("holds no private key (PEM blocks: %s): %s", strings.Join(kinds, ", "), keyFix)}
}

// parseKeyBlock reads one PEM block: the RSA key, a *KeyError for a
// private key that cannot sign an RS256 JWT, or nil, nil for a block that
// is not a private key.
func parseKeyBlock(block *pem.Block) (*rsa.PrivateKey, error) {
	notRSA := func(kind string) error {
		return &KeyError{"is " + kind + " key; Salesforce's JWT bearer flow signs with RS256, which needs an RSA key: " + newKeyFix}
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		if block.Headers["Proc-Type"] != "" && strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED") {
			return nil, &KeyError{"is encrypted with a passphrase (Proc-Type: 4,ENCRYPTED), which sf2loki cannot ask for: " + decryptHint}
		}
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, &KeyError{fmt.Sprintf("holds an RSA PRIVATE KEY block that does not parse (%v): %s", err, keyFix)}
		}
		return k, nil
	case "ENCRYPTED PRIVATE KEY":
		return nil, &KeyError{"is encrypted with a passphrase (ENCRYPTED PRIVATE KEY, PKCS#8), which sf2loki cannot ask for: " + decryptHint}
	case "EC PRIVATE KEY":
		return nil, notRSA("an EC (ECDSA)")
	case "DSA PRIVATE KEY":
		return nil, notRSA("a DSA")
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			if k1, err1 := x509.ParsePKCS1PrivateKey(block.Bytes); err1 == nil {
				return k1, nil // PKCS#1 under a PKCS#8 label, as some tools write it
			}
			return nil, &KeyError{fmt.Sprintf("holds a PRIVATE KEY block that does not parse (%v): %s", err, keyFix)}
		}
		switch k := k.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			return nil, notRSA("an EC (ECDSA)")
		case ed25519.PrivateKey:
			return nil, notRSA("an Ed25519")
		case *ecdh.PrivateKey:
			return nil, notRSA("an X25519")
		default:
			return nil, notRSA(fmt.Sprintf("a %T", k))
		}
	}
	return nil, nil
}
