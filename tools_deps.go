//go:build tools

// Package tools pins the project's module dependencies before their first use.
package tools

import (
	_ "github.com/coder/websocket"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/gorilla/websocket"
	_ "github.com/hashicorp/go-metrics/compat"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "golang.org/x/sys/unix"
	_ "k8s.io/client-go/kubernetes"
	_ "modernc.org/sqlite"
	_ "sigs.k8s.io/yaml"
)
