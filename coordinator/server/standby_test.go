package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// --cold-standby wins over OCE_COLD_STANDBY, either over the default (warm
// followers); a value that is not a boolean is refused with NOT_CONFIGURED
// naming where it came from, even when the other one is good.
func TestColdStandbySetting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flag    string
		env     string
		want    bool
		wantErr string
	}{
		{name: "default warm", want: false},
		{name: "variable", env: "true", want: true},
		{name: "variable off", env: "false", want: false},
		{name: "variable 1", env: "1", want: true},
		{name: "flag", flag: "true", want: true},
		{name: "flag off over the variable", flag: "false", env: "true", want: false},
		{name: "blank flag takes the variable", flag: " ", env: "true", want: true},
		{name: "bad variable", env: "yes", wantErr: envColdStandby + `="yes"`},
		{name: "bad flag over a good variable", flag: "on", env: "false", wantErr: flagColdStandby + `="on"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cold, err := coldStandby(tc.flag, func(k string) string {
				if k == envColdStandby {
					return tc.env
				}
				return ""
			})
			if tc.wantErr != "" {
				require.ErrorIs(t, err, ErrDriverConfig)
				require.ErrorContains(t, err, tc.wantErr)
				require.Equal(t, CodeNotConfigured, StartCode(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, cold)
		})
	}
}
