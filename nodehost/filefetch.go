package nodehost

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"mime"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

type fetchParams struct {
	fileCommon
	MaxBytes *int64 `json:"maxBytes,omitempty"`
	RootPath string `json:"rootPath,omitempty"`
}

// fetchResult is file.fetch's payload (fields in key order, see fileCommon).
// A preflight carries no content: Base64 (empty for an empty file) and
// SHA256 are then absent.
type fetchResult struct {
	Base64   *string  `json:"base64,omitempty"`
	Binding  *Binding `json:"binding"`
	MimeType string   `json:"mimeType"`
	OK       bool     `json:"ok"`
	Path     string   `json:"path"`
	SHA256   string   `json:"sha256,omitempty"`
	Size     int64    `json:"size"`
}

func (h *Host) fileFetch(ctx context.Context, raw []byte) (any, error) {
	var p fetchParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	fd, r, st, err := h.lookup(p.fileCommon, wantFile, true)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	limit := int64(DefaultMaxFetchBytes)
	if p.MaxBytes != nil && *p.MaxBytes > 0 && *p.MaxBytes < limit {
		limit = *p.MaxBytes
	}
	if st.Size > limit {
		return nil, cmdErr(CodeTooLarge, "file is larger than %d bytes", limit)
	}
	out := fetchResult{Binding: existingBinding(st), MimeType: mimeOf(r.abs()), OK: true, Path: r.abs(), Size: st.Size}
	if p.PreflightOnly {
		return out, nil
	}
	data, err := readContent(ctx, fd, st, limit)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	content := base64.StdEncoding.EncodeToString(data)
	out.Base64, out.SHA256, out.Size = &content, hex.EncodeToString(sum[:]), int64(len(data))
	return out, nil
}

// workspaceTypes are the media types of the documents a workspace usually
// holds, fixed here so the node answers the same on every machine: Go's
// mime package also reads the host's /etc/mime.types, which the Harness
// image does not have and a developer's machine does.
var workspaceTypes = map[string]string{
	".md":       "text/markdown; charset=utf-8",
	".markdown": "text/markdown; charset=utf-8",
	".txt":      "text/plain; charset=utf-8",
	".json":     "application/json",
	".yaml":     "application/yaml",
	".yml":      "application/yaml",
	".toml":     "application/toml",
	".csv":      "text/csv; charset=utf-8",
}

func mimeOf(path string) string {
	ext := strings.ToLower(filepath.Ext(path))
	if t, ok := workspaceTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}
