package state

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNamesOf(t *testing.T) {
	f := newFx(t)
	for _, tc := range []struct {
		name                     string
		ns, agent, cfg, revision string
		want                     Names
	}{
		{"every id named", "ns1", "a1", "c1", "", Names{Namespace: "one", Agent: "bot", Configuration: "cfg"}},
		{"empty ids name nothing", "", "", "", "", Names{}},
		{"unknown ids name nothing", "nsX", "aX", "cX", "rX", Names{}},
		{"some of them", "ns2", "", "c2", "", Names{Namespace: "two", Configuration: "cfg"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, f.m.NamesOf(tc.ns, tc.agent, tc.cfg, tc.revision))
		})
	}
}
