package iam

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cedar-policy/cedar-go"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"
)

// entitySchema declares the entity types policies see. Every resource of a
// Namespace (the Namespace included) has a namespace attribute; a
// Namespace names its three role groups.
const entitySchema = `entity Cluster;
entity Role;
entity Group in [Role];
entity Namespace in [Cluster] {
  name: String,
  namespace: Namespace,
  viewers: Role,
  deployers: Role,
  admins: Role,
};
entity User in [Group, Role] {
  name: String,
  external: Bool,
};
entity ServicePrincipal in [Namespace, Role] {
  name: String,
  namespace: Namespace,
  agent: String,
};
entity Configuration in [Namespace] {
  name: String,
  namespace: Namespace,
};
entity Agent in [Namespace] {
  name: String,
  namespace: Namespace,
  executionMode: String,
  computeId: String,
  configuration: String,
  harnessAuthMethod: String,
  credentialKind: String,
  credentialSource: String,
  servicePrincipal: String,
};
entity CredentialSource in [Namespace] {
  name: String,
  namespace: Namespace,
  method: String,
  kind: String,
};
entity Restriction in [Cluster] {
  name: String,
};
`

// SchemaText is the Cedar schema Restrictions are validated against
// (docs/API.md lists it too).
var SchemaText = buildSchema()

func buildSchema() string {
	var b strings.Builder
	b.WriteString(entitySchema)
	for _, g := range []Action{GroupView, GroupOperate, GroupAdminister, GroupAuthenticated} {
		fmt.Fprintf(&b, "action %s;\n", g)
	}
	names := Actions()
	slices.Sort(names)
	for _, a := range names {
		info := actions[a]
		fmt.Fprintf(&b, "action %s", a)
		if info.Group != "" {
			fmt.Fprintf(&b, " in [%s]", info.Group)
		}
		fmt.Fprintf(&b, " appliesTo {\n  principal: [User, ServicePrincipal],\n  resource: [%s],\n  context: {",
			strings.Join(info.Resources, ", "))
		keys := make([]string, 0, len(info.Context))
		for k := range info.Context {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\n    %s: %s", k, info.Context[k])
		}
		if len(keys) > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString("},\n};\n")
	}
	return b.String()
}

// validator checks Restrictions against SchemaText.
var validator = func() *validate.Validator {
	var s schema.Schema
	if err := s.UnmarshalCedar([]byte(SchemaText)); err != nil {
		panic("iam: schema: " + err.Error())
	}
	rs, err := s.Resolve()
	if err != nil {
		panic("iam: schema: " + err.Error())
	}
	return validate.New(rs)
}()

var parseLine = regexp.MustCompile(`:(\d+):(\d+)`)

// backquoted finds the first `name` an error message quotes.
var backquoted = regexp.MustCompile("`([^`]+)`")

// ParseRestriction parses and validates a Restriction's policy text: at
// least one policy, only forbid policies, each valid against the schema.
// A refusal is a *PolicyError naming the line.
func ParseRestriction(name, text string) (cedar.PolicyList, error) {
	if !utf8.ValidString(text) {
		i := 0
		for i < len(text) {
			r, n := utf8.DecodeRuneInString(text[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return nil, &PolicyError{Line: 1 + strings.Count(text[:i], "\n"), Message: "the policy is not UTF-8 text"}
	}
	list, err := cedar.NewPolicyListFromBytes(name, []byte(text))
	if err != nil {
		line := 1
		if m := parseLine.FindStringSubmatch(err.Error()); m != nil {
			fmt.Sscan(m[1], &line)
		}
		// The parser's position is clamped into the text.
		line = max(1, min(line, 1+strings.Count(text, "\n")))
		return nil, &PolicyError{Line: line, Message: strings.TrimPrefix(err.Error(), "parser error: ")}
	}
	if len(list) == 0 {
		return nil, &PolicyError{Line: 1, Message: "the text holds no policy"}
	}
	for _, p := range list {
		pos := p.Position()
		if p.Effect() != cedar.Forbid {
			return nil, &PolicyError{Line: pos.Line, Message: "a Restriction may only forbid: permit policies are the built-in roles'"}
		}
		if err := validator.Policy("", (*xast.Policy)(p.AST())); err != nil {
			msg := strings.ReplaceAll(err.Error(), "\n", "; ")
			return nil, &PolicyError{Line: errorLine(text, pos.Offset, pos.Line, msg), Message: msg}
		}
	}
	return list, nil
}

// errorLine finds the line of the first name a validation error quotes,
// searching the policy's own text from its offset; else the policy's line.
func errorLine(text string, offset, line int, msg string) int {
	m := backquoted.FindStringSubmatch(msg)
	if m == nil || offset < 0 || offset > len(text) {
		return line
	}
	needle := m[1]
	if i := strings.LastIndex(needle, "::"); i >= 0 {
		needle = needle[i+2:]
	}
	needle = strings.Trim(needle, `"`)
	i := strings.Index(text[offset:], needle)
	if needle == "" || i < 0 {
		return line
	}
	return line + strings.Count(text[offset:offset+i], "\n")
}
