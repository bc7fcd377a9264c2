package fakeprovider

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"oce.dev/oce/shared/secretfile"
)

// ErrKeyFileMode reports a key file others could read or change.
var ErrKeyFileMode = errors.New("fakeprovider: key file must be private (mode 0600, or a Secret volume's 0440 for its fsGroup)")

// LoadKeyFile reads accepted keys, one per line, from a private file (keys
// never travel in argv): the secret file rule of oce's supervisors
// (shared/secretfile), so a Kubernetes Secret volume entry is accepted.
func LoadKeyFile(path string) ([]string, error) {
	if _, err := secretfile.Check(path); err != nil {
		if errors.Is(err, secretfile.ErrInsecure) {
			return nil, fmt.Errorf("%w: %w", ErrKeyFileMode, err)
		}
		return nil, fmt.Errorf("fakeprovider: key file: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fakeprovider: key file: %w", err)
	}
	defer f.Close()
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
