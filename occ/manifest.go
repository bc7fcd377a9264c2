package occ

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/api/wire"
)

// Manifests of occ apply and occ diff (docs/OPERATIONS.md, "Declarative
// operation"): YAML or JSON documents, several to a file separated by
// `---`, each
//
//	apiVersion: oce.dev/v1
//	kind: Namespace | Credential | Configuration | Agent | RoleBinding
//	metadata: {name: NAME, namespace: NS, labels: {KEY: VALUE}}
//	spec: {...}   # the body the API's create and update take
//
// decoded strictly: an unknown kind or field is an error naming the file
// and the document, and nothing is applied.

// ManifestAPIVersion is the one apiVersion manifests have.
const ManifestAPIVersion = "oce.dev/v1"

// Manifest kinds, in the order apply writes them: what an object names
// exists before it.
const (
	KindNamespace     = "Namespace"
	KindCredential    = "Credential"
	KindConfiguration = "Configuration"
	KindAgent         = "Agent"
	KindRoleBinding   = "RoleBinding"
)

// manifestKinds lists the kinds in apply order.
var manifestKinds = []string{KindNamespace, KindCredential, KindConfiguration, KindAgent, KindRoleBinding}

// Codes of manifest errors: a closed set, the first word of the message.
const (
	CodeManifestUnreadable = "MANIFEST_UNREADABLE" // a file or directory could not be read
	CodeManifestSyntax     = "MANIFEST_SYNTAX"     // not YAML (or JSON), or not a mapping
	CodeManifestAPIVersion = "MANIFEST_API_VERSION"
	CodeManifestKind       = "MANIFEST_KIND"      // an unknown kind
	CodeManifestField      = "MANIFEST_FIELD"     // an unknown field, or one of the wrong type
	CodeManifestMissing    = "MANIFEST_MISSING"   // a required field is absent
	CodeManifestInvalid    = "MANIFEST_INVALID"   // a value occ can tell is wrong (a name, a role's scope)
	CodeManifestDuplicate  = "MANIFEST_DUPLICATE" // the same object twice
	// CodeManifestUnsupported: the change cannot be made by an update
	// (a service principal, removing a harness binding, a credential
	// value); nothing is applied.
	CodeManifestUnsupported = "MANIFEST_UNSUPPORTED"
)

// ErrManifest matches every *ManifestError.
var ErrManifest = errors.New("manifest refused")

// ManifestError is a manifest that cannot be applied: where it is and why.
type ManifestError struct {
	Code string
	// File and Doc (1-based) locate the document; Line is its first line,
	// or the line of a syntax error.
	File      string
	Doc, Line int
	// Object names the object when it is known (agent/team/coder).
	Object string
	Err    error
}

func (e *ManifestError) Error() string {
	where := e.File
	if e.Doc > 0 {
		where += fmt.Sprintf(" document %d", e.Doc)
	}
	if e.Line > 0 {
		where += fmt.Sprintf(" (line %d)", e.Line)
	}
	if e.Object != "" {
		where += " " + e.Object
	}
	return fmt.Sprintf("%s: %s: %v", e.Code, where, e.Err)
}

func (e *ManifestError) Unwrap() error { return e.Err }

// Is matches ErrManifest.
func (e *ManifestError) Is(target error) bool { return target == ErrManifest }

// manifestDoc is one document's envelope.
type manifestDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

// Specs of each kind: what the API's create and update take, less the
// name and namespace (metadata).

type namespaceSpec struct {
	// Quota, when present, is managed by the manifest ({} clears it);
	// when absent the Namespace's quota is left as it is (a platform
	// team's to set).
	Quota *wire.NamespaceQuota `json:"quota,omitempty"`
}

type configurationSpec struct {
	Document json.RawMessage `json:"document"`
}

type credentialSpec struct {
	// From registers the source from a location (secret:…, local:…);
	// empty means the source must exist already (values are never in
	// manifests).
	From string `json:"from,omitempty"`
}

type agentSpec struct {
	Configuration    string               `json:"configuration"`
	ExecutionMode    string               `json:"executionMode,omitempty"`
	HarnessAuth      *wire.HarnessAuth    `json:"harnessAuth,omitempty"`
	ComputeID        string               `json:"computeId,omitempty"`
	Plugins          []string             `json:"plugins,omitempty"`
	Rollback         *wire.RollbackPolicy `json:"rollback,omitempty"`
	ServicePrincipal string               `json:"servicePrincipal,omitempty"`
	Resources        *wire.AgentResources `json:"resources,omitempty"`
}

type roleBindingSpec struct {
	Role    string       `json:"role"`
	Subject wire.Subject `json:"subject"`
}

// object is one decoded manifest document.
type object struct {
	kind, namespace, name string
	file                  string
	doc, line             int
	spec                  any // *namespaceSpec, *configurationSpec, …
	// labels are metadata.labels: apply makes them the object's (none
	// clears them); occ apply --prune selects by them.
	labels map[string]string
}

// ref names the object as apply prints it: kind/namespace/name.
func (o *object) ref() string {
	k := map[string]string{KindNamespace: "namespace", KindCredential: "credential", KindConfiguration: "config",
		KindAgent: "agent", KindRoleBinding: "rolebinding"}[o.kind]
	if o.namespace == "" {
		return k + "/" + o.name
	}
	return k + "/" + o.namespace + "/" + o.name
}

func (o *object) errorf(code string, format string, a ...any) *ManifestError {
	return &ManifestError{Code: code, File: o.file, Doc: o.doc, Line: o.line, Object: o.ref(), Err: fmt.Errorf(format, a...)}
}

// manifestFiles expands -f arguments: a file, '-' for stdin, or a
// directory's *.yaml, *.yml and *.json files (recursive: its
// subdirectories' too), in name order.
func manifestFiles(args []string, recursive bool) ([]string, error) {
	var out []string
	for _, p := range args {
		if p == "-" {
			out = append(out, p)
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, &ManifestError{Code: CodeManifestUnreadable, File: p, Err: err}
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && (!recursive || strings.HasPrefix(d.Name(), ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			switch filepath.Ext(path) {
			case ".yaml", ".yml", ".json":
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, &ManifestError{Code: CodeManifestUnreadable, File: p, Err: err}
		}
		slices.Sort(found)
		if len(found) == 0 {
			return nil, &ManifestError{Code: CodeManifestUnreadable, File: p, Err: errors.New("the directory holds no .yaml, .yml or .json file")}
		}
		out = append(out, found...)
	}
	return out, nil
}

// readManifests reads and decodes every document of files; defaultNS is
// the namespace of namespaced objects that name none. Any error refuses
// the whole set.
func (a *app) readManifests(files []string, defaultNS string) ([]*object, error) {
	var objs []*object
	seen := map[string]*object{}
	for _, f := range files {
		var data []byte
		var err error
		if f == "-" {
			data, err = readAllLimited(a.opts.Stdin)
		} else {
			data, err = readFileLimited(f)
		}
		name := inputName(f)
		if err != nil {
			return nil, &ManifestError{Code: CodeManifestUnreadable, File: name, Err: err}
		}
		n := 0
		for _, d := range splitDocuments(data) {
			if len(bytes.TrimSpace(stripComments(d.data))) == 0 {
				continue // an empty document (a leading ---, comments only) is not counted
			}
			n++
			d.index = n
			o, err := decodeObject(name, d, defaultNS)
			if err != nil {
				return nil, err
			}
			key := o.kind + "/" + o.namespace + "/" + o.name
			if rb, ok := o.spec.(*roleBindingSpec); ok {
				// A binding is what it grants, whatever the manifest calls it.
				key = o.kind + "/" + o.namespace + "/" + rb.Role + "/" + rb.Subject.Kind + ":" + rb.Subject.Name
			}
			if prev, dup := seen[key]; dup {
				return nil, o.errorf(CodeManifestDuplicate, "the same object as %s document %d", prev.file, prev.doc)
			}
			seen[key] = o
			objs = append(objs, o)
		}
	}
	// Apply order: by kind, then as given.
	slices.SortStableFunc(objs, func(x, y *object) int {
		return slices.Index(manifestKinds, x.kind) - slices.Index(manifestKinds, y.kind)
	})
	return objs, nil
}

// readFileLimited reads a manifest file within maxInputBytes.
func readFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllLimited(f)
}

// document is one `---`-separated document and where it starts.
type document struct {
	index, line int // 1-based; index counts the non-empty documents
	data        []byte
}

// docSeparator is a YAML document marker line (with an optional comment).
var docSeparator = regexp.MustCompile(`^---\s*(#.*)?$`)

// splitDocuments splits data at `---` lines, keeping each document's first
// line so errors can name absolute lines.
func splitDocuments(data []byte) []document {
	var docs []document
	cur := document{index: 1, line: 1}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxInputBytes+1)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if docSeparator.Match(bytes.TrimRight(line, "\r")) {
			docs = append(docs, cur)
			cur = document{index: cur.index + 1, line: n + 1}
			continue
		}
		cur.data = append(cur.data, line...)
		cur.data = append(cur.data, '\n')
	}
	return append(docs, cur)
}

// yamlLine finds the line a sigs.k8s.io/yaml error names.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// decodeObject decodes one (non-empty) document strictly.
func decodeObject(file string, d document, defaultNS string) (*object, error) {
	fail := func(code string, line int, err error) error {
		return &ManifestError{Code: code, File: file, Doc: d.index, Line: line, Err: err}
	}
	j, err := yaml.YAMLToJSON(d.data)
	if err != nil {
		line := d.line
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			rel, _ := strconv.Atoi(m[1])
			line = d.line + rel - 1
			msg = strings.Replace(msg, m[0], "line "+strconv.Itoa(line), 1)
		}
		return nil, fail(CodeManifestSyntax, line, errors.New(strings.TrimPrefix(msg, "error converting YAML to JSON: ")))
	}
	if t := bytes.TrimSpace(j); len(t) == 0 || t[0] != '{' {
		return nil, fail(CodeManifestSyntax, d.line, errors.New("a document must be a mapping (apiVersion, kind, metadata, spec)"))
	}
	var m manifestDoc
	if err := strictJSON(j, &m); err != nil {
		return nil, fail(CodeManifestField, d.line, err)
	}
	switch {
	case m.APIVersion == "":
		return nil, fail(CodeManifestMissing, d.line, errors.New("apiVersion is required ("+ManifestAPIVersion+")"))
	case m.APIVersion != ManifestAPIVersion:
		return nil, fail(CodeManifestAPIVersion, d.line, fmt.Errorf("apiVersion %q is not %s", m.APIVersion, ManifestAPIVersion))
	case m.Kind == "":
		return nil, fail(CodeManifestMissing, d.line, errors.New("kind is required"))
	case !slices.Contains(manifestKinds, m.Kind):
		return nil, fail(CodeManifestKind, d.line, fmt.Errorf("kind %q is not one of %s", m.Kind, strings.Join(manifestKinds, ", ")))
	case m.Metadata.Name == "":
		return nil, fail(CodeManifestMissing, d.line, errors.New("metadata.name is required"))
	case len(m.Metadata.Labels) > 0 && m.Kind == KindCredential:
		return nil, fail(CodeManifestField, d.line, errors.New("metadata.labels: a Credential carries no labels (Namespaces, Configurations, Agents and role bindings do)"))
	}
	o := &object{kind: m.Kind, name: m.Metadata.Name, namespace: m.Metadata.Namespace, file: file, doc: d.index, line: d.line,
		labels: normLabels(m.Metadata.Labels)}
	if o.kind == KindNamespace {
		if o.namespace != "" {
			return nil, o.errorf(CodeManifestInvalid, "a Namespace has no metadata.namespace")
		}
	} else if o.namespace == "" {
		o.namespace = defaultNS
	}
	spec := bytes.TrimSpace(m.Spec)
	if len(spec) == 0 || string(spec) == "null" {
		spec = []byte("{}")
	}
	switch o.kind {
	case KindNamespace:
		o.spec = &namespaceSpec{}
	case KindCredential:
		o.spec = &credentialSpec{}
	case KindConfiguration:
		o.spec = &configurationSpec{}
	case KindAgent:
		o.spec = &agentSpec{}
	case KindRoleBinding:
		o.spec = &roleBindingSpec{}
	}
	if err := strictJSON(spec, o.spec); err != nil {
		return nil, o.errorf(CodeManifestField, "spec: %v", err)
	}
	return o, o.check()
}

// check refuses what is missing or malformed before anything is sent.
func (o *object) check() error {
	switch s := o.spec.(type) {
	case *configurationSpec:
		if t := bytes.TrimSpace(s.Document); len(t) == 0 || t[0] != '{' {
			return o.errorf(CodeManifestMissing, "spec.document is required: the native OpenClaw configuration, a mapping")
		}
	case *agentSpec:
		if s.Configuration == "" {
			return o.errorf(CodeManifestMissing, "spec.configuration is required")
		}
	case *roleBindingSpec:
		if s.Role == "" || s.Subject.Kind == "" || s.Subject.Name == "" {
			return o.errorf(CodeManifestMissing, "spec.role, spec.subject.kind and spec.subject.name are required")
		}
		if s.Role == wire.RoleClusterAdmin || s.Role == wire.RoleMetricsReader {
			// Granted cluster-wide: the binding has no namespace.
			o.namespace = ""
		}
		if s.Subject.Kind == wire.PrincipalServicePrincipal && !strings.Contains(s.Subject.Name, "/") {
			if o.namespace == "" {
				return o.errorf(CodeManifestInvalid, "a service principal is granted only namespace roles")
			}
			s.Subject.Name = o.namespace + "/" + s.Subject.Name
		}
	}
	return nil
}

// strictJSON decodes exactly one JSON value into v, refusing unknown
// fields.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// stripComments drops YAML comment lines, so a document of comments only
// counts as empty.
func stripComments(data []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}
