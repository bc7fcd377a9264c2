package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// ErrBadSourceRef reports a harnessAuth sourceRef SecretDir cannot resolve.
var ErrBadSourceRef = errors.New("local: sourceRef must name a file in the secrets dir (local:<name>)")

var secretName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// SecretDir resolves harnessAuth sourceRefs of the form "local:<name>" (or a
// bare <name>) to the file dir/<name>, which must be mode 0600 or 0400. The
// bytes go to the secret file the revision's topology and method need:
// model-api-key (embedded), openai-api-key (dedicated api_key) or
// codex-access-token (dedicated codex_pat).
func SecretDir(dir string) Credentials {
	return CredentialsFunc(func(_ context.Context, rev state.Revision) (map[string][]byte, error) {
		a := rev.HarnessAuth
		if a == nil {
			return nil, nil
		}
		name := strings.TrimPrefix(a.SourceRef, "local:")
		if !secretName.MatchString(name) {
			return nil, ErrBadSourceRef
		}
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("local: secret %s: %w", name, err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("local: secret %s must be mode 0600", name)
		}
		v, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("local: secret %s: %w", name, err)
		}
		v = []byte(strings.TrimSpace(string(v)))
		key := contract.SecretModelAPIKey
		if rev.Mode == state.ModeDedicated {
			switch a.Method {
			case "api_key":
				key = contract.SecretOpenAIAPIKey
			case "codex_pat":
				key = contract.SecretCodexAccessToken
			default:
				return nil, fmt.Errorf("local: harnessAuth method %q is not delivered by the local driver", a.Method)
			}
		}
		return map[string][]byte{key: v}, nil
	})
}
