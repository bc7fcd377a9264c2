package ocproto

import "strings"

// Credentials are what a client may authenticate with.
type Credentials struct {
	Token             string // explicit shared token
	Password          string // shared gateway password
	DeviceToken       string // explicit device token
	StoredDeviceToken string // device token persisted from an earlier hello-ok
	BootstrapToken    string // one-use bootstrap token from a setup code
}

// ConnectAuth is the auth object of connect params (closed).
type ConnectAuth struct {
	Token          string `json:"token,omitempty"`
	BootstrapToken string `json:"bootstrapToken,omitempty"`
	DeviceToken    string `json:"deviceToken,omitempty"`
	Password       string `json:"password,omitempty"`
}

// SelectAuth applies the reference client's auth-field rule: an explicit
// shared token wins, then an explicit device token; a stored device token is
// used only when neither a token nor a password is configured (and no
// bootstrap token unless a stored token exists); the bootstrap token is sent
// only when nothing else resolved; a password is always sent when set. It
// returns the auth object and the token the signature covers.
func SelectAuth(c Credentials) (ConnectAuth, string) {
	token := strings.TrimSpace(c.Token)
	password := strings.TrimSpace(c.Password)
	explicitDevice := strings.TrimSpace(c.DeviceToken)
	stored := strings.TrimSpace(c.StoredDeviceToken)
	bootstrap := strings.TrimSpace(c.BootstrapToken)

	device := explicitDevice
	if device == "" && token == "" && password == "" && (bootstrap == "" || stored != "") {
		device = stored
	}
	auth := ConnectAuth{Token: token, Password: password, DeviceToken: device}
	sig := token
	if sig == "" {
		sig = device
	}
	if token == "" && device == "" && password == "" {
		auth.BootstrapToken = bootstrap
		sig = bootstrap
	}
	return auth, sig
}
