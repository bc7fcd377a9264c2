package state

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Labels: a small map of Kubernetes-style key/value pairs on Namespaces,
// Configurations, Agents and role bindings. The coordinator gives them no
// meaning; occ apply --prune selects by them what a manifest set owns.

// MaxLabels bounds the labels of one object.
const MaxLabels = 32

// Label syntax, as Kubernetes has it: a key is an optional DNS-subdomain
// prefix and '/', then a name; a name and a value are at most 63
// characters of [A-Za-z0-9._-] that begin and end alphanumeric (a value may
// be empty).
var (
	labelName   = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	labelPrefix = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

const (
	maxLabelName   = 63
	maxLabelValue  = 63
	maxLabelPrefix = 253
)

// ErrLabels matches every label or selector that is malformed.
var ErrLabels = errors.New("labels")

// ValidLabelKey reports why k is not a label key (nil: it is one).
func ValidLabelKey(k string) error {
	name := k
	if prefix, n, ok := strings.Cut(k, "/"); ok {
		if prefix == "" || len(prefix) > maxLabelPrefix || !labelPrefix.MatchString(prefix) {
			return fmt.Errorf("%w: key %q: the prefix must be a DNS subdomain of at most %d characters", ErrLabels, k, maxLabelPrefix)
		}
		name = n
	}
	if name == "" || len(name) > maxLabelName || !labelName.MatchString(name) {
		return fmt.Errorf("%w: key %q: the name must be 1 to %d characters of letters, digits, '-', '_' and '.', beginning and ending with a letter or digit",
			ErrLabels, truncateLabel(k), maxLabelName)
	}
	return nil
}

// ValidLabelValue reports why v is not a label value (nil: it is one).
func ValidLabelValue(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > maxLabelValue || !labelName.MatchString(v) {
		return fmt.Errorf("%w: value %q: at most %d characters of letters, digits, '-', '_' and '.', beginning and ending with a letter or digit",
			ErrLabels, truncateLabel(v), maxLabelValue)
	}
	return nil
}

// ValidateLabels reports the first malformed label of m, in key order
// (nil: all are well formed and there are at most MaxLabels).
func ValidateLabels(m map[string]string) error {
	if len(m) > MaxLabels {
		return fmt.Errorf("%w: %d labels, at most %d", ErrLabels, len(m), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := ValidLabelKey(k); err != nil {
			return err
		}
		if err := ValidLabelValue(m[k]); err != nil {
			return fmt.Errorf("label %s: %w", k, err)
		}
	}
	return nil
}

func truncateLabel(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// cloneLabels copies m; an empty map becomes nil (stored alike).
func cloneLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// Requirement is one term of a label selector.
type Requirement struct {
	Key string
	// Op is "=" (equal), "!=" (absent or different) or "" (exists).
	Op    string
	Value string
}

// Selector is a conjunction of requirements; the empty one selects all.
type Selector []Requirement

// ParseSelector parses a Kubernetes equality selector: comma-separated
// terms key=value (or key==value), key!=value, or key (the key exists).
func ParseSelector(s string) (Selector, error) {
	var out Selector
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		var r Requirement
		switch {
		case strings.Contains(term, "!="):
			k, v, _ := strings.Cut(term, "!=")
			r = Requirement{Key: strings.TrimSpace(k), Op: "!=", Value: strings.TrimSpace(v)}
		case strings.Contains(term, "=="):
			k, v, _ := strings.Cut(term, "==")
			r = Requirement{Key: strings.TrimSpace(k), Op: "=", Value: strings.TrimSpace(v)}
		case strings.Contains(term, "="):
			k, v, _ := strings.Cut(term, "=")
			r = Requirement{Key: strings.TrimSpace(k), Op: "=", Value: strings.TrimSpace(v)}
		default:
			r = Requirement{Key: term}
		}
		if r.Key == "" {
			return nil, fmt.Errorf("%w: selector term %q names no key", ErrLabels, truncateLabel(term))
		}
		if err := ValidLabelKey(r.Key); err != nil {
			return nil, fmt.Errorf("selector: %w", err)
		}
		if err := ValidLabelValue(r.Value); err != nil {
			return nil, fmt.Errorf("selector: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Matches reports whether labels satisfy every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		v, ok := labels[r.Key]
		switch r.Op {
		case "=":
			if !ok || v != r.Value {
				return false
			}
		case "!=":
			if ok && v == r.Value {
				return false
			}
		default:
			if !ok {
				return false
			}
		}
	}
	return true
}

// Empty reports whether s selects everything.
func (s Selector) Empty() bool { return len(s) == 0 }

// SetLabels replaces the labels of one object (an empty map removes them);
// the API answers PUT …/labels with it. Which kind the ID names is the
// command's: CmdSetNamespaceLabels, CmdSetConfigurationLabels,
// CmdSetAgentLabels or CmdSetRoleBindingLabels.
type SetLabels struct {
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels,omitempty"`
}

// AuditLabels records a SetLabels; details count the labels.
const AuditLabels = "oce.labels.set"

func labelsDetails(m map[string]string) map[string]string {
	return map[string]string{"labels": fmt.Sprint(len(m))}
}

func applySetNamespaceLabels(d *data, c Command, p SetLabels) (Namespace, error) {
	if err := ValidateLabels(p.Labels); err != nil {
		return Namespace{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ns, ok := d.namespaces[p.ID]
	if !ok {
		return Namespace{}, fmt.Errorf("%w: namespace %q", ErrNotFound, p.ID)
	}
	ns.Labels = cloneLabels(p.Labels)
	d.namespaces[ns.ID] = ns
	d.audit3(c, AuditLabels, NamespaceResource(ns.Name), ns.ID, "", labelsDetails(ns.Labels))
	return cloneNamespace(ns), nil
}

func applySetConfigurationLabels(d *data, c Command, p SetLabels) (Configuration, error) {
	if err := ValidateLabels(p.Labels); err != nil {
		return Configuration{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	cf, ok := d.configurations[p.ID]
	if !ok {
		return Configuration{}, fmt.Errorf("%w: configuration %q", ErrNotFound, p.ID)
	}
	// The document and its generation are untouched: a label is no input
	// of a revision.
	cf.Labels = cloneLabels(p.Labels)
	d.configurations[cf.ID] = cf
	d.audit3(c, AuditLabels, ScopedResource("Configuration", d.nsName(cf.NamespaceID), cf.Name), cf.NamespaceID, "",
		labelsDetails(cf.Labels))
	return cloneConfiguration(cf), nil
}

func applySetAgentLabels(d *data, c Command, p SetLabels) (Agent, error) {
	if err := ValidateLabels(p.Labels); err != nil {
		return Agent{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	a, ok := d.agents[p.ID]
	if !ok {
		return Agent{}, fmt.Errorf("%w: agent %q", ErrNotFound, p.ID)
	}
	if a.Deleting {
		return Agent{}, fmt.Errorf("%w: agent %q is being deleted", ErrConflict, a.ID)
	}
	a.Labels = cloneLabels(p.Labels)
	d.agents[a.ID] = a
	d.audit3(c, AuditLabels, d.agentResource(a), a.NamespaceID, a.ID, labelsDetails(a.Labels))
	return cloneAgent(a), nil
}

func applySetRoleBindingLabels(d *data, c Command, p SetLabels) (RoleBinding, error) {
	if err := ValidateLabels(p.Labels); err != nil {
		return RoleBinding{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	b, ok := d.ids.bindings[p.ID]
	if !ok {
		return RoleBinding{}, fmt.Errorf("%w: role binding %q", ErrNotFound, p.ID)
	}
	b.Labels = cloneLabels(p.Labels)
	d.ids.bindings[b.ID] = b
	d.audit3(c, AuditLabels, d.bindingResource(b), b.NamespaceID, "", labelsDetails(b.Labels))
	return cloneBinding(b), nil
}

func cloneBinding(b RoleBinding) RoleBinding {
	b.Labels = cloneLabels(b.Labels)
	return b
}

// The "labels" snapshot section: the labels of Namespaces, Configurations,
// Agents and role bindings, added after version 2 of the stored types. A
// state without labels writes no section, so its bytes and Digest stay
// those of before, and snapshots written before labels restore unlabelled.

func labelsEmpty(d *data) bool {
	for _, v := range d.namespaces {
		if len(v.Labels) > 0 {
			return false
		}
	}
	for _, v := range d.configurations {
		if len(v.Labels) > 0 {
			return false
		}
	}
	for _, v := range d.agents {
		if len(v.Labels) > 0 {
			return false
		}
	}
	for _, v := range d.ids.bindings {
		if len(v.Labels) > 0 {
			return false
		}
	}
	return true
}

// labelsOf encodes the labels of the records of m that have any, by ID.
func labelsOf[T any](e *snapEnc, m map[string]T, get func(T) map[string]string) {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(m)) {
		if len(get(m[id])) > 0 {
			ids = append(ids, id)
		}
	}
	e.uint(uint64(len(ids)))
	for _, id := range ids {
		e.str(id)
		e.strMap(get(m[id]))
	}
}

func marshalLabels(e *snapEnc, d *data) {
	labelsOf(e, d.namespaces, func(v Namespace) map[string]string { return v.Labels })
	labelsOf(e, d.configurations, func(v Configuration) map[string]string { return v.Labels })
	labelsOf(e, d.agents, func(v Agent) map[string]string { return v.Labels })
	labelsOf(e, d.ids.bindings, func(v RoleBinding) map[string]string { return v.Labels })
}

func unmarshalLabels(r *snapDec, d *data) {
	loadLabels(r, d.namespaces, "namespace", func(v *Namespace, l map[string]string) { v.Labels = l })
	loadLabels(r, d.configurations, "configuration", func(v *Configuration, l map[string]string) { v.Labels = l })
	loadLabels(r, d.agents, "agent", func(v *Agent, l map[string]string) { v.Labels = l })
	loadLabels(r, d.ids.bindings, "role binding", func(v *RoleBinding, l map[string]string) { v.Labels = l })
}

// loadLabels reads what labelsOf wrote into the records of m.
func loadLabels[T any](r *snapDec, m map[string]T, kind string, set func(*T, map[string]string)) {
	for range r.count() {
		id := r.str()
		l := r.strMap()
		v, ok := m[id]
		if r.err == nil && (!ok || len(l) == 0) {
			r.fail(fmt.Errorf("labels of unknown %s %q, or none", kind, id))
		}
		if r.err != nil {
			return
		}
		set(&v, l)
		m[id] = v
	}
}
