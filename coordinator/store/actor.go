package store

import "context"

type actorKey struct{}

// WithActor returns a context whose proposals are stamped with actor (the
// authenticated principal recorded in the Command envelope and audit).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor set by WithActor, or "".
func ActorFrom(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}
