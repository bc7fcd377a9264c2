package admission

import (
	"regexp"
	"sort"
	"strings"
)

// Literal credentials (issue 14): secrets enter oce only as references (a
// harnessAuth binding, an env or secret reference the runtime resolves);
// a Configuration carrying a literal credential is refused at save, so the
// value is never replicated, backed up or served back.

// secretKeys are setting names (compared case-insensitively, without _ and
// -) whose string value is a credential.
var secretKeys = map[string]bool{"apikey": true, "token": true, "accesstoken": true, "refreshtoken": true,
	"bottoken": true, "apptoken": true, "authtoken": true, "usertoken": true, "password": true, "secret": true,
	"clientsecret": true, "signingsecret": true, "webhooksecret": true, "privatekey": true, "bearertoken": true,
	"sessiontoken": true, "secretkey": true, "accesskey": true}

// secretHeaders are header names whose values are credentials.
var secretHeaders = map[string]bool{"authorization": true, "x-api-key": true, "api-key": true,
	"proxy-authorization": true, "cookie": true, "x-goog-api-key": true}

// referenceOnly matches values that are references, not secrets: an env
// substitution the runtime resolves.
var referenceOnly = regexp.MustCompile(`^\$\{[A-Z_][A-Z0-9_]*\}$`)

func normKey(k string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(k))
}

// literalCredential returns the path of the first literal credential in
// the document tree, or "".
func literalCredential(tree map[string]any) string {
	var walk func(v any, path string, headers bool) string
	walk = func(v any, path string, headers bool) string {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := strings.TrimPrefix(keyPath(path, k), ".")
				if s, ok := t[k].(string); ok {
					secret := secretKeys[normKey(k)] || (headers && secretHeaders[strings.ToLower(k)])
					if secret && strings.TrimSpace(s) != "" && !referenceOnly.MatchString(strings.TrimSpace(s)) {
						return p
					}
					continue
				}
				if hit := walk(t[k], p, strings.EqualFold(k, "headers")); hit != "" {
					return hit
				}
			}
		case []any:
			for i, c := range t {
				if hit := walk(c, path+"["+itoaStd(i)+"]", false); hit != "" {
					return hit
				}
			}
		}
		return ""
	}
	return walk(tree, "", false)
}
