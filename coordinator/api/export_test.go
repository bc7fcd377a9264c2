package api

import (
	"context"

	"oce.dev/oce/shared/ocproto"
)

// SetChat replaces the operator turn the messages route runs; the returned
// func restores it.
func SetChat(f func(context.Context, ocproto.OperatorConfig, string, string, ocproto.ChatHandler) (string, error)) func() {
	old := chat
	chat = f
	return func() { chat = old }
}
