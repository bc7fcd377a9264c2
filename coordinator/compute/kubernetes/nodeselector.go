package kubernetes

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrBadNodeSelector rejects a node selector setting (code INVALID_NODE_SELECTOR).
var ErrBadNodeSelector = errors.New("kubernetes: invalid node selector")

// CodeBadNodeSelector is the closed-set code of ErrBadNodeSelector.
const CodeBadNodeSelector = "INVALID_NODE_SELECTOR"

// ParseNodeSelector reads a node selector setting ("key=value,key2=value2",
// spaces around items allowed, empty for none) as the coordinator's
// OCE_NODE_SELECTOR and OCE_GATEWAY_NODE_SELECTOR carry it. Keys must be
// label keys and values label values; a key may appear once.
func ParseNodeSelector(s string) (map[string]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		k, v, ok := strings.Cut(item, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("%w: %q is not key=value", ErrBadNodeSelector, item)
		case len(validation.IsQualifiedName(k)) > 0:
			return nil, fmt.Errorf("%w: %q is not a label key", ErrBadNodeSelector, k)
		case len(validation.IsValidLabelValue(v)) > 0:
			return nil, fmt.Errorf("%w: %q is not a label value", ErrBadNodeSelector, v)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: key %q appears twice", ErrBadNodeSelector, k)
		}
		out[k] = v
	}
	return out, nil
}

// FormatNodeSelector is ParseNodeSelector's inverse (keys sorted).
func FormatNodeSelector(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}
