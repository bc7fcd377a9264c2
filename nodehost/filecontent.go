package nodehost

import (
	"context"
	"errors"
	"hash"

	"golang.org/x/sys/unix"
)

// readContent reads a regular file's content through its O_PATH descriptor,
// at most limit bytes (PAYLOAD_TOO_LARGE beyond), honouring ctx between chunks.
func readContent(ctx context.Context, pfd int, st *unix.Stat_t, limit int64) ([]byte, error) {
	fd, err := reopen(pfd, st, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, min(st.Size, limit)+1)
	for {
		if ctx.Err() != nil {
			return nil, ctxErr(ctx)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(cap(buf), len(buf)+readChunk)
		n, err := unix.Read(fd, buf[len(buf):end])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, cmdErr(CodeUnavailable, "read failed")
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, cmdErr(CodeTooLarge, "file grew past %d bytes", limit)
		}
	}
}

// hashContent feeds at most limit bytes of a regular file to hsh and returns
// how many it read, honouring ctx between chunks.
func hashContent(ctx context.Context, pfd int, st *unix.Stat_t, hsh hash.Hash, limit int64) (int64, error) {
	fd, err := reopen(pfd, st, unix.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	buf := make([]byte, min(readChunk, max(st.Size, 1)))
	var total int64
	for total < limit {
		if ctx.Err() != nil {
			return total, ctxErr(ctx)
		}
		n, err := unix.Read(fd, buf[:min(int64(len(buf)), limit-total)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return total, cmdErr(CodeUnavailable, "read failed")
		}
		if n == 0 {
			break
		}
		hsh.Write(buf[:n])
		total += int64(n)
	}
	return total, nil
}
