package fakeprovider

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrKeyFileMode reports a key file readable by group or others.
var ErrKeyFileMode = errors.New("fakeprovider: key file must be mode 0600")

// LoadKeyFile reads accepted keys, one per line, from a file of mode 0600
// (keys never travel in argv).
func LoadKeyFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fakeprovider: key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("fakeprovider: key file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w (is %o)", ErrKeyFileMode, st.Mode().Perm())
	}
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k := strings.TrimSpace(sc.Text()); k != "" {
			keys = append(keys, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("fakeprovider: key file: %w", err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("fakeprovider: key file %s holds no key", path)
	}
	return keys, nil
}

// Serve starts the fake, writes "PORT n" to out, and serves until ctx ends.
func Serve(ctx context.Context, o Options, out io.Writer) error {
	s, err := Start(ctx, o)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := fmt.Fprintf(out, "PORT %d\n", s.Port()); err != nil {
		return fmt.Errorf("fakeprovider: announce port: %w", err)
	}
	<-ctx.Done()
	return nil
}
