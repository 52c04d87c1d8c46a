package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/baton-engine/baton"
)

// maxSignedToken bounds the signed tokens a verifier looks at; real ones
// are about 200 bytes.
const maxSignedToken = 1024

// signer is the installation's token key. Every signed token is
// prefix + base64url(JSON claims) + "." + base64url(MAC), the MAC being
// HMAC-SHA256 over everything before the dot, so the prefix — which says
// what kind of token it is — is signed too: a token of one kind never
// verifies as another.
type signer []byte

// loadSigner returns the installation's signing key, creating it on first
// use (the first node to store one wins).
func loadSigner(ctx context.Context, store baton.SettingStore) (signer, error) {
	var fresh [32]byte
	_, _ = rand.Read(fresh[:]) // crypto/rand.Read never returns an error.
	stored, err := store.EnsureSetting(ctx, SigningKeySetting, hex.EncodeToString(fresh[:]))
	if err != nil {
		return nil, fmt.Errorf("token signing key: %w", err)
	}
	key, err := hex.DecodeString(stored)
	if err != nil || len(key) < 32 {
		return nil, fmt.Errorf("token signing key: the stored %s is not 32 hex-encoded bytes", SigningKeySetting)
	}
	return key, nil
}

// seal signs claims as a token with the given prefix.
func (k signer) seal(prefix string, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	head := prefix + base64.RawURLEncoding.EncodeToString(payload)
	return head + "." + base64.RawURLEncoding.EncodeToString(k.mac(head)), nil
}

func (k signer) mac(head string) []byte {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(head))
	return h.Sum(nil)
}

// open returns the payload of a well-formed token with the prefix whose
// MAC is right (compared in constant time).
func (k signer) open(prefix, token string) ([]byte, bool) {
	head, payload, mac, ok := cutSigned(prefix, token)
	if !ok || !hmac.Equal(mac, k.mac(head)) {
		return nil, false
	}
	return payload, true
}

// cutSigned takes a token apart: the signed head (everything before the
// dot), the decoded payload and the decoded MAC. It checks only the shape:
// the prefix, one dot, canonical base64url on both sides and a MAC of
// SHA-256's size.
func cutSigned(prefix, token string) (head string, payload, mac []byte, ok bool) {
	if len(token) > maxSignedToken {
		return "", nil, nil, false
	}
	head, m64, found := strings.Cut(token, ".")
	p64, prefixed := strings.CutPrefix(head, prefix)
	if !found || !prefixed || p64 == "" {
		return "", nil, nil, false
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(p64)
	if err != nil {
		return "", nil, nil, false
	}
	mac, err = base64.RawURLEncoding.Strict().DecodeString(m64)
	if err != nil || len(mac) != sha256.Size {
		return "", nil, nil, false
	}
	return head, payload, mac, true
}

// decodeStrict decodes exactly one JSON object into v, refusing unknown
// fields and trailing data.
func decodeStrict(payload []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil && !dec.More()
}
