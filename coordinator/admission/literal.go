package admission

import (
	"math"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode"

	"oce.dev/oce/coordinator/admission/openclawschema"
)

// Literal credentials (issues 14 and 25): secrets enter oce only as
// references (a harnessAuth binding, an env or secret reference the runtime
// resolves); a Configuration carrying a literal credential anywhere is
// refused at save, naming its JSON path, so the value is never replicated,
// backed up or served back. Credentials are found by what they are, in
// this order:
//
//   - by their value, anywhere: the shapes of known provider keys and
//     tokens, JWTs, private keys, and URLs carrying userinfo;
//   - by the pinned runtime's own markers: every setting the OpenClaw
//     schema marks sensitive (openclawschema.SensitivePaths, generated from
//     the runtime) holds a credential, so any literal there is refused;
//   - in header and environment maps (which mix credentials with plain
//     settings, and which the runtime marks whole): an entry whose name says
//     it is a credential, or whose value is high-entropy;
//   - by the setting names that always meant a credential (secretKeys).
//
// A reference is never a literal: ${VAR} (alone, or after an auth scheme
// such as "Bearer "), an OpenClaw secret reference object ({source,
// provider, id}), and, at a sensitive setting, public material (a PEM
// certificate, an SSH public key, a URL without userinfo or query) or the
// pointer a *File / *Path / *Env setting holds (an absolute path, a
// variable name).

// Reasons a value is a literal credential (the error's details.reason).
const (
	ReasonShape     = "credential-shape"  // a known key or token format
	ReasonUserinfo  = "url-userinfo"      // a URL carrying a user or password
	ReasonSensitive = "sensitive-setting" // a setting the runtime marks sensitive
	ReasonMapEntry  = "credential-entry"  // a header or env entry named or shaped as a credential
	ReasonKeyName   = "credential-name"   // a setting named as a credential
)

// secretKeys are setting names (compared case-insensitively, without _ and
// -) whose string value is a credential.
var secretKeys = map[string]bool{"apikey": true, "token": true, "accesstoken": true, "refreshtoken": true,
	"bottoken": true, "apptoken": true, "authtoken": true, "usertoken": true, "password": true, "secret": true,
	"clientsecret": true, "signingsecret": true, "webhooksecret": true, "privatekey": true, "bearertoken": true,
	"sessiontoken": true, "secretkey": true, "accesskey": true}

// reference matches values that are references, not secrets: an env
// substitution the runtime resolves, alone or after an auth scheme.
var reference = regexp.MustCompile(`^(?:(?i:bearer|basic|token|bot)\s+)?\$\{[A-Z_][A-Z0-9_]*\}$`)

// credentialShapes are the formats of provider keys and tokens, matched
// anywhere inside a value (a key inside a URL or after "Bearer ").
var credentialShapes = regexp.MustCompile(strings.Join([]string{
	`\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`,       // OpenAI, Anthropic
	`\b(?:sk|rk|pk)_live_[A-Za-z0-9]{16,}`,                         // Stripe
	`\bgh[pousr]_[A-Za-z0-9]{30,}`,                                 // GitHub tokens
	`\bgithub_pat_[A-Za-z0-9_]{22,}`,                               // GitHub fine-grained
	`\bglpat-[A-Za-z0-9_-]{20,}`,                                   // GitLab
	`\bxox[abposr]-[A-Za-z0-9-]{10,}`,                              // Slack
	`\bxapp-[0-9]-[A-Za-z0-9-]{10,}`,                               // Slack app-level
	`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b`,            // AWS access key ids
	`\bAIza[0-9A-Za-z_-]{35}`,                                      // Google API keys
	`\bya29\.[0-9A-Za-z_-]{20,}`,                                   // Google OAuth access tokens
	`\bhf_[A-Za-z0-9]{30,}`,                                        // Hugging Face
	`\bnpm_[A-Za-z0-9]{36}`,                                        // npm
	`\bxai-[A-Za-z0-9]{20,}`,                                       // xAI
	`\bgsk_[A-Za-z0-9]{20,}`,                                       // Groq
	`\b[0-9]{8,10}:AA[A-Za-z0-9_-]{30,}`,                           // Telegram bot tokens
	`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`, // JWTs
	`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----`,                   // private keys
	`\boce_[0-9a-f]{32}_[A-Za-z0-9_-]{43}`,                         // oce's own API tokens
}, "|"))

// literalCredential returns the JSON path of the first literal credential
// in the document tree and why, or "" when there is none.
func literalCredential(tree map[string]any) (path, reason string) {
	w := walker{marks: sensitiveMarks()}
	return w.object(tree, "", "", []*markNode{w.marks}, mapNone)
}

// mapKind is what kind of map an object is, for its entries.
type mapKind int

const (
	mapNone    mapKind = iota
	mapHeaders         // HTTP headers
	mapEnv             // environment variables
)

// kindOf is the map kind of the object under key k (parent is the key of
// the object holding it).
func kindOf(parent, k string) mapKind {
	switch strings.ToLower(k) {
	case "headers":
		return mapHeaders
	case "env", "environment":
		return mapEnv
	case "vars":
		if strings.EqualFold(parent, "env") {
			return mapEnv
		}
	}
	return mapNone
}

type walker struct{ marks *markNode }

// object walks a JSON object at path whose own key is key; nodes are the
// sensitive-path trie nodes its path matches; kind is its map kind.
func (w walker) object(t map[string]any, path, key string, nodes []*markNode, kind mapKind) (string, string) {
	if isSecretRef(t) {
		return "", "" // an OpenClaw secret reference: a reference by construction
	}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := strings.TrimPrefix(keyPath(path, k), ".")
		next := step(nodes, k, false)
		if hit, why := w.value(t[k], p, key, k, next, kind); hit != "" {
			return hit, why
		}
	}
	return "", ""
}

// value judges one value at path p under key k of an object whose own key
// is parent.
func (w walker) value(v any, p, parent, k string, nodes []*markNode, kind mapKind) (string, string) {
	switch t := v.(type) {
	case string:
		if why := judge(t, k, nodes, kind); why != "" {
			return p, why
		}
	case map[string]any:
		return w.object(t, p, k, nodes, kindOf(parent, k))
	case []any:
		for i, c := range t {
			// The items of a marked setting are marked too (a list of
			// secret inputs).
			items := append(step(nodes, "", true), fields(nodes)...)
			if hit, why := w.value(c, p+"["+itoaStd(i)+"]", parent, k, items, mapNone); hit != "" {
				return hit, why
			}
		}
	}
	return "", ""
}

// judge returns why string s under key k is a literal credential, or "".
func judge(s, k string, nodes []*markNode, kind mapKind) string {
	s = strings.TrimSpace(s)
	if s == "" || reference.MatchString(s) {
		return ""
	}
	if credentialShapes.MatchString(s) {
		return ReasonShape
	}
	if hasUserinfo(s) {
		return ReasonUserinfo
	}
	field, entry := false, false
	for _, n := range nodes {
		field = field || n.field
		entry = entry || n.entry
	}
	switch {
	case field:
		// The runtime's marker decides: only public material and pointers
		// are not credentials there.
		if publicMaterial(s) || pointer(k, s) {
			return ""
		}
		return ReasonSensitive
	case entry || kind != mapNone:
		if credentialName(k) || highEntropy(s) {
			return ReasonMapEntry
		}
	case secretKeys[normKey(k)]:
		return ReasonKeyName
	}
	return ""
}

// isSecretRef reports whether an object is an OpenClaw secret reference.
func isSecretRef(t map[string]any) bool {
	src, _ := t["source"].(string)
	_, hasID := t["id"].(string)
	if !hasID || (src != "env" && src != "file" && src != "exec" && src != "store") {
		return false
	}
	for k := range t {
		if k != "source" && k != "provider" && k != "id" {
			return false
		}
	}
	return true
}

// hasUserinfo reports whether s is a URL carrying a password, or a user
// that is itself credential-shaped or high-entropy.
func hasUserinfo(s string) bool {
	if !strings.Contains(s, "://") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return false
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	name := u.User.Username()
	return credentialShapes.MatchString(name) || highEntropy(name)
}

var (
	pemCertificate = regexp.MustCompile(`^(?:-----BEGIN (?:CERTIFICATE|PUBLIC KEY|X509 CRL)-----[A-Za-z0-9+/=\s]+-----END (?:CERTIFICATE|PUBLIC KEY|X509 CRL)-----\s*)+$`)
	sshPublic      = regexp.MustCompile(`(?m)^(?:\S+\s+)?(?:ssh-(?:ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com|ssh-[a-z0-9-]+-cert-v01@openssh\.com)\s+AAAA[A-Za-z0-9+/=]+`)
	envVarName     = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
)

// publicMaterial reports whether s, at a sensitive setting, is material the
// runtime marks for redaction but that is public: certificates, SSH public
// keys (known hosts, certificates), a URL without userinfo or query.
func publicMaterial(s string) bool {
	if pemCertificate.MatchString(s) || sshPublic.MatchString(s) {
		return true
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		return err == nil && u.User == nil && u.RawQuery == "" && u.Fragment == "" && u.Host != ""
	}
	return false
}

// pointer reports whether s, at a *File / *Path / *Env setting, names
// where the runtime reads the secret: an absolute path, a variable name.
func pointer(k, s string) bool {
	switch {
	case strings.HasSuffix(k, "File") || strings.HasSuffix(k, "Path") || strings.HasSuffix(k, "Dir"):
		return strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~/")
	case strings.HasSuffix(k, "Env"):
		return envVarName.MatchString(s)
	}
	return false
}

// credentialWords are the words of header and variable names that say the
// value is a credential; credentialPairs the adjacent pairs.
var (
	credentialWords = map[string]bool{"auth": true, "authorization": true, "token": true, "secret": true,
		"password": true, "passwd": true, "pwd": true, "credential": true, "credentials": true, "cookie": true,
		"apikey": true, "privatekey": true, "signature": true, "pat": true, "jwt": true, "bearer": true}
	credentialPairs = map[[2]string]bool{{"api", "key"}: true, {"access", "key"}: true, {"private", "key"}: true,
		{"secret", "key"}: true, {"session", "key"}: true, {"client", "secret"}: true, {"signing", "key"}: true}
)

// credentialName reports whether a header or variable name says its value
// is a credential (X-Custom-Auth, OPENAI_API_KEY, x-api-key).
func credentialName(k string) bool {
	words := nameWords(k)
	for i, w := range words {
		if credentialWords[w] {
			return true
		}
		if i > 0 && credentialPairs[[2]string{words[i-1], w}] {
			return true
		}
	}
	return false
}

// nameWords splits a name on -, _, . and lower-to-upper case changes,
// lower-cased.
func nameWords(k string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prev := rune(0)
	for _, r := range k {
		switch {
		case r == '-' || r == '_' || r == '.' || unicode.IsSpace(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// Thresholds of highEntropy: random keys of 20 or more characters in a
// base64/hex alphabet carry well over 3.5 bits a character; words, paths,
// host names and version strings stay below or fail the alphabet test.
const (
	entropyMinLen  = 20
	entropyMinBits = 3.5
)

// highEntropy reports whether s looks like a random secret: long, one
// token of a key alphabet, letters and digits mixed, and a Shannon entropy
// of at least entropyMinBits a character.
func highEntropy(s string) bool {
	if len(s) < entropyMinLen || strings.HasPrefix(s, "/") || strings.Contains(s, "://") {
		return false
	}
	var letters, digits bool
	counts := map[rune]int{}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			letters = true
		case r >= '0' && r <= '9':
			digits = true
		case strings.ContainsRune("+/=_-.~", r):
		default:
			return false
		}
		counts[r]++
	}
	if !letters || !digits {
		return false
	}
	bits := 0.0
	n := float64(len(s))
	for _, c := range counts {
		p := float64(c) / n
		bits -= p * math.Log2(p)
	}
	return bits >= entropyMinBits
}

func normKey(k string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(k))
}

// markNode is a node of the trie of the runtime's sensitive paths: each
// edge is a key, "*" (any key of a map) or "[]" (any item of an array).
// field marks a setting that holds a credential; entry marks the entries of
// a map the runtime marks whole (headers.*, env.*).
type markNode struct {
	next         map[string]*markNode
	field, entry bool
}

var (
	marksOnce sync.Once
	marks     *markNode
)

// sensitiveMarks builds the trie once from the generated paths. The
// runtime marks a secret input and, beneath it, the fields of the secret
// reference it may hold (webhookSecret.id); it marks a plugin that keeps
// references to a vault whole, down to every setting of it. Those inner
// markings are references or their metadata, so only the topmost marking
// of a path counts.
func sensitiveMarks() *markNode {
	marksOnce.Do(func() {
		paths := openclawschema.SensitivePaths()
		split := make([][]string, 0, len(paths))
		for _, p := range paths {
			split = append(split, splitMarkPath(p))
		}
		marks = &markNode{next: map[string]*markNode{}}
		for _, segs := range split {
			if coveredByAncestor(segs, split) {
				continue
			}
			n := marks
			for _, s := range segs {
				c := n.next[s]
				if c == nil {
					c = &markNode{next: map[string]*markNode{}}
					n.next[s] = c
				}
				n = c
			}
			if segs[len(segs)-1] == "*" {
				n.entry = true
			} else {
				n.field = true
			}
		}
	})
	return marks
}

// splitMarkPath splits "a.b[].c.*" into a, b, [], c, *.
func splitMarkPath(p string) []string {
	var out []string
	for _, part := range strings.Split(p, ".") {
		items := 0
		for strings.HasSuffix(part, "[]") {
			part = strings.TrimSuffix(part, "[]")
			items++
		}
		out = append(out, part)
		for range items {
			out = append(out, "[]")
		}
	}
	return out
}

// coveredByAncestor reports whether a proper prefix of segs is marked too.
func coveredByAncestor(segs []string, all [][]string) bool {
	for _, o := range all {
		if len(o) < len(segs) && equalPrefix(o, segs) {
			return true
		}
	}
	return false
}

func equalPrefix(prefix, segs []string) bool {
	for i := range prefix {
		if prefix[i] != segs[i] {
			return false
		}
	}
	return true
}

// step follows key k (or an array item) from every node.
func step(nodes []*markNode, k string, item bool) []*markNode {
	var out []*markNode
	for _, n := range nodes {
		if item {
			if c := n.next["[]"]; c != nil {
				out = append(out, c)
			}
		} else if c := n.next[k]; c != nil {
			out = append(out, c)
		}
		if c := n.next["*"]; c != nil {
			out = append(out, c)
		}
	}
	return out
}

// fields are the nodes that mark a setting (their array items inherit it).
func fields(nodes []*markNode) []*markNode {
	var out []*markNode
	for _, n := range nodes {
		if n.field {
			out = append(out, n)
		}
	}
	return out
}
