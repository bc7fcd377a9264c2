package occ

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	"oce.dev/oce/shared/logging"
)

// logLineBuffer bounds the line copyPretty renders; a longer line passes
// through unchanged.
const logLineBuffer = 64 << 10

// copyPretty copies a log stream line by line, rendering each JSON record
// as "TIME LEVEL msg key=value…" (logging.Pretty); other lines pass
// through unchanged. It returns at r's end, or r's or w's error.
func copyPretty(w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, logLineBuffer)
	long := false // inside a line longer than the buffer
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = true
			if _, werr := w.Write(chunk); werr != nil {
				return werr
			}
			continue
		}
		if len(chunk) > 0 {
			out := chunk
			if !long {
				if text, _, ok := logging.Pretty(bytes.TrimSuffix(bytes.TrimSuffix(chunk, []byte("\n")), []byte("\r"))); ok {
					out = append([]byte(text), '\n')
				}
			}
			if _, werr := w.Write(out); werr != nil {
				return werr
			}
		}
		long = false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
