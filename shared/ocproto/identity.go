package ocproto

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"oce.dev/oce/shared/atomicfile"
)

// ErrBadIdentity reports an identity file that is unreadable or inconsistent.
var ErrBadIdentity = errors.New("ocproto: invalid device identity")

var b64 = base64.RawURLEncoding

// Identity is an Ed25519 device identity. The device id is the lowercase hex
// SHA-256 of the raw 32-byte public key.
type Identity struct {
	DeviceID   string
	PublicKey  ed25519.PublicKey
	PrivateKey ed25519.PrivateKey
}

// NewIdentity generates a fresh device identity.
func NewIdentity() (*Identity, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ocproto: generate identity: %w", err)
	}
	return &Identity{DeviceID: DeviceID(pub), PublicKey: pub, PrivateKey: priv}, nil
}

// DeviceID derives the device id of a raw public key.
func DeviceID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// PublicKeyB64 is the base64url (unpadded) raw public key.
func (i *Identity) PublicKeyB64() string { return b64.EncodeToString(i.PublicKey) }

// Sign returns the base64url Ed25519 signature of payload.
func (i *Identity) Sign(payload string) string {
	return b64.EncodeToString(ed25519.Sign(i.PrivateKey, []byte(payload)))
}

// VerifySignature checks a base64url signature made with a base64url public key.
func VerifySignature(publicKeyB64, payload, signatureB64 string) bool {
	pub, err := b64.DecodeString(publicKeyB64)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return false
	}
	sig, err := b64.DecodeString(signatureB64)
	if err != nil {
		return false
	}
	return ed25519.Verify(pub, []byte(payload), sig)
}

type identityFile struct {
	Version    int    `json:"version"`
	DeviceID   string `json:"deviceId"`
	PublicKey  string `json:"publicKey"`
	PrivateKey string `json:"privateKeySeed"`
}

// Marshal is the identity as Save writes it (and a driver provisions it:
// contract.EnvNodehostIdentity).
func (i *Identity) Marshal() ([]byte, error) {
	return json.Marshal(identityFile{Version: 1, DeviceID: i.DeviceID, PublicKey: i.PublicKeyB64(),
		PrivateKey: b64.EncodeToString(i.PrivateKey.Seed())})
}

// Save writes the identity to path (mode 0600, write + fsync + rename).
func (i *Identity) Save(path string) error {
	b, err := i.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

// LoadIdentity reads an identity written by Save and checks its consistency.
func LoadIdentity(path string) (*Identity, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseIdentity(b)
}

// ParseIdentity decodes what Marshal wrote and checks its consistency.
func ParseIdentity(b []byte) (*Identity, error) {
	var f identityFile
	if err := strictUnmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadIdentity, err)
	}
	seed, err := b64.DecodeString(f.PrivateKey)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: private key", ErrBadIdentity)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	id := &Identity{DeviceID: DeviceID(pub), PublicKey: pub, PrivateKey: priv}
	if f.DeviceID != id.DeviceID || f.PublicKey != id.PublicKeyB64() {
		return nil, fmt.Errorf("%w: device id or public key does not match the private key", ErrBadIdentity)
	}
	return id, nil
}

// SignatureParams are the fields the connect signature covers.
type SignatureParams struct {
	DeviceID     string
	ClientID     string
	ClientMode   string
	Role         string
	Scopes       []string
	SignedAtMs   int64
	Token        string // auth.token ?? auth.deviceToken ?? auth.bootstrapToken ?? ""; never the password
	Nonce        string
	Platform     string
	DeviceFamily string
}

// PayloadV3 is the preferred signature payload.
func PayloadV3(p SignatureParams) string {
	return strings.Join([]string{"v3", p.DeviceID, p.ClientID, p.ClientMode, p.Role, strings.Join(p.Scopes, ","),
		fmt.Sprint(p.SignedAtMs), p.Token, p.Nonce, normalizeMeta(p.Platform), normalizeMeta(p.DeviceFamily)}, "|")
}

// PayloadV2 is the older payload without platform and device family.
func PayloadV2(p SignatureParams) string {
	return strings.Join([]string{"v2", p.DeviceID, p.ClientID, p.ClientMode, p.Role, strings.Join(p.Scopes, ","),
		fmt.Sprint(p.SignedAtMs), p.Token, p.Nonce}, "|")
}

func normalizeMeta(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
