package ocproto

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSelectAuth(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Credentials
		want ConnectAuth
		sig  string
	}{
		{"explicit token wins the signature", Credentials{Token: "t", DeviceToken: "d", Password: "p"}, ConnectAuth{Token: "t", DeviceToken: "d", Password: "p"}, "t"},
		{"password always sent, stored token not", Credentials{Password: "p", StoredDeviceToken: "s"}, ConnectAuth{Password: "p"}, ""},
		{"stored token alone", Credentials{StoredDeviceToken: "s"}, ConnectAuth{DeviceToken: "s"}, "s"},
		{"stored token beats bootstrap", Credentials{StoredDeviceToken: "s", BootstrapToken: "b"}, ConnectAuth{DeviceToken: "s"}, "s"},
		{"bootstrap only when nothing else", Credentials{BootstrapToken: "b"}, ConnectAuth{BootstrapToken: "b"}, "b"},
		{"bootstrap not with password", Credentials{BootstrapToken: "b", Password: "p"}, ConnectAuth{Password: "p"}, ""},
		{"explicit device token", Credentials{DeviceToken: "d"}, ConnectAuth{DeviceToken: "d"}, "d"},
		{"whitespace is empty", Credentials{Token: "  ", BootstrapToken: "b"}, ConnectAuth{BootstrapToken: "b"}, "b"},
		{"nothing", Credentials{}, ConnectAuth{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, sig := SelectAuth(tc.in)
			require.Equal(t, tc.want, a)
			require.Equal(t, tc.sig, sig)
		})
	}
}

func TestPayloads(t *testing.T) {
	p := SignatureParams{DeviceID: "abc", ClientID: "node-host", ClientMode: "node", Role: "node", SignedAtMs: 1795935387668,
		Token: "", Nonce: "n1", Platform: " Linux ", DeviceFamily: "Linux"}
	require.Equal(t, "v3|abc|node-host|node|node||1795935387668||n1|linux|linux", PayloadV3(p))
	require.Equal(t, "v2|abc|node-host|node|node||1795935387668||n1", PayloadV2(p))
	p.Scopes = []string{"operator.pairing", "operator.admin"}
	require.Contains(t, PayloadV3(p), "|operator.pairing,operator.admin|")
}

func TestIdentityRoundTrip(t *testing.T) {
	id, err := NewIdentity()
	require.NoError(t, err)
	require.Len(t, id.DeviceID, 64)
	require.Equal(t, DeviceID(id.PublicKey), id.DeviceID)
	sig := id.Sign("hello")
	require.True(t, VerifySignature(id.PublicKeyB64(), "hello", sig))
	require.False(t, VerifySignature(id.PublicKeyB64(), "hellO", sig))

	path := filepath.Join(t.TempDir(), "identity.json")
	require.NoError(t, id.Save(path))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	back, err := LoadIdentity(path)
	require.NoError(t, err)
	require.Equal(t, id.DeviceID, back.DeviceID)

	// tampered device id is refused
	b, _ := os.ReadFile(path)
	require.NoError(t, os.WriteFile(path, []byte(string(b[:20])+"0"+string(b[21:])), 0o600))
	_, err = LoadIdentity(path)
	require.Error(t, err)
}

func TestSetupCode(t *testing.T) {
	c := SetupCode{URL: "ws://127.0.0.1:1234", BootstrapToken: "bt", ExpiresAtMs: 42}
	back, err := DecodeSetupCode(c.Encode())
	require.NoError(t, err)
	require.Equal(t, c, back)
	for _, bad := range []string{"", "!!!", "e30", // {}
		SetupCode{URL: "http://x", BootstrapToken: "b"}.Encode(),
		SetupCode{URL: "ws://x"}.Encode()} {
		_, err := DecodeSetupCode(bad)
		require.ErrorIs(t, err, ErrBadSetupCode, bad)
	}
}

func TestDecodeFrameClosed(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"type":"req","id":"1","method":"m"}`, true},
		{`{"type":"req","id":"1","method":"m","params":{"x":1}}`, true},
		{`{"type":"req","id":"1","method":"m","access":1}`, false},
		{`{"type":"req","id":"","method":"m"}`, false},
		{`{"type":"res","id":"1","ok":true}`, true},
		{`{"type":"res","id":"1","ok":false,"error":{"code":"X","message":"y","details":{"code":"Z"}}}`, true},
		{`{"type":"res","id":"1","ok":false,"error":{"code":"X","message":"y","extra":1}}`, false},
		{`{"type":"event","event":"tick","payload":{"ts":1},"seq":3}`, true},
		{`{"type":"event"}`, false},
		{`{"type":"nope"}`, false},
		{`{"type":"req","id":"1","method":"m"} {}`, false},
		{`[]`, false},
	} {
		_, err := DecodeFrame([]byte(tc.in))
		if tc.ok {
			require.NoError(t, err, tc.in)
		} else {
			require.ErrorIs(t, err, ErrBadFrame, tc.in)
		}
	}
}

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{`{"type":"req","id":"1","method":"m"}`, `{"type":"res","id":"1","ok":true,"payload":{}}`,
		`{"type":"event","event":"node.invoke.request","payload":{"id":"x"}}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeFrame(b)
		if err != nil {
			return
		}
		n := 0
		for _, set := range []bool{fr.Req != nil, fr.Res != nil, fr.Event != nil} {
			if set {
				n++
			}
		}
		require.Equal(t, 1, n)
	})
}

func FuzzDecodeSetupCode(f *testing.F) {
	f.Add(SetupCode{URL: "ws://127.0.0.1:1", BootstrapToken: "b", ExpiresAtMs: 1}.Encode())
	f.Add("e30")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeSetupCode(s)
		if err == nil {
			require.NotEmpty(t, c.BootstrapToken)
		}
	})
}
