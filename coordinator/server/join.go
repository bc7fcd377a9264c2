package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Join retry pacing: the first retry after joinRetryMin, doubling up to
// joinRetryMax, for as long as the server runs.
const (
	joinRetryMin   = 200 * time.Millisecond
	joinRetryMax   = 5 * time.Second
	joinRequestTTL = 15 * time.Second
)

// joinRequest is the body of POST /v1/cluster/join.
type joinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
}

// joinCluster asks a member (any: a follower's NOT_LEADER answer names the
// leader, which is tried next) to add this node, retrying until it succeeds
// or ctx ends. targets is a comma-separated list of HTTP addresses.
func joinCluster(ctx context.Context, log *slog.Logger, targets, token string, req joinRequest) error {
	list := strings.Split(targets, ",")
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	delay := joinRetryMin
	for attempt := 0; ; attempt++ {
		target := strings.TrimSpace(list[attempt%len(list)])
		for hop := 0; hop < 3 && target != ""; hop++ {
			leader, err := postJoin(ctx, target, token, body)
			if err == nil {
				log.Info("joined the cluster", "via", target)
				return nil
			}
			log.Info("join attempt failed", "via", target, "error", err.Error())
			target = leader
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, joinRetryMax)
	}
}

// postJoin sends one join request; on NOT_LEADER it returns the leader's
// address from the error details.
func postJoin(ctx context.Context, target, token string, body []byte) (leader string, err error) {
	ctx, cancel := context.WithTimeout(ctx, joinRequestTTL)
	defer cancel()
	url := target
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(url, "/")+"/v1/cluster/join", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return "", nil
	}
	var e struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	if l, ok := e.Error.Details["leader"].(string); ok {
		leader = l
	}
	return leader, fmt.Errorf("join: HTTP %d %s", resp.StatusCode, e.Error.Code)
}
