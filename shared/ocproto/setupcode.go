package ocproto

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrBadSetupCode reports a setup code that does not decode to {url,
// bootstrapToken, expiresAtMs}.
var ErrBadSetupCode = errors.New("ocproto: invalid setup code")

// SetupCode is the one-use enrollment target: base64url JSON.
type SetupCode struct {
	URL            string `json:"url"`
	BootstrapToken string `json:"bootstrapToken"`
	ExpiresAtMs    int64  `json:"expiresAtMs"`
}

// DecodeSetupCode decodes a setup code (padded or unpadded base64url). The
// gateway may add fields to the payload; only url and bootstrapToken are
// required, and url must be ws:// or wss://.
func DecodeSetupCode(s string) (SetupCode, error) {
	s = strings.TrimSpace(s)
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return SetupCode{}, fmt.Errorf("%w: not base64url", ErrBadSetupCode)
	}
	var c SetupCode
	if err := json.Unmarshal(raw, &c); err != nil {
		return SetupCode{}, fmt.Errorf("%w: not JSON", ErrBadSetupCode)
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return SetupCode{}, fmt.Errorf("%w: url must be ws:// or wss://", ErrBadSetupCode)
	}
	if c.BootstrapToken == "" {
		return SetupCode{}, fmt.Errorf("%w: no bootstrap token", ErrBadSetupCode)
	}
	return c, nil
}

// Encode renders the setup code as unpadded base64url JSON.
func (c SetupCode) Encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}
