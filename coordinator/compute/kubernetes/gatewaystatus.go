package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/contract"
)

// StatusRequestTimeout bounds one call to a Gateway's status server.
const StatusRequestTimeout = 10 * time.Second

// ErrGatewayStatus marks a failed call to a Gateway's status server; the
// driver reports it as a transient dependency failure.
var ErrGatewayStatus = errors.New("kubernetes: gateway status call failed")

// Node is one workspace node the Gateway knows (contract.RouteNodes).
type Node = contract.Node

// Endpoint names the ready Gateway Pod serving a dedicated revision's
// bootstrap (its own candidate Gateway, or the healthy predecessor's).
type Endpoint struct {
	Namespace   string // the Gateway namespace
	Service     string // the Agent's Gateway Service
	RevisionID  string // the revision the serving Gateway runs
	Pod         string // the single ready Gateway Pod
	PodIP       string // its IP (status.podIP)
	TokenSecret string // Secret in Namespace whose contract.SecretStatusToken is the status bearer
	NodeID      string // the workspace node the serving Pod pins (contract.EnvWorkspaceNodeID), if any
}

// ServiceURL is the status server behind the Agent's Gateway Service.
func (e Endpoint) ServiceURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", e.Service, e.Namespace, contract.StatusPort)
}

// GatewayStatus is the driver's view of a Gateway's authenticated status
// routes (docs/RUNTIME-CONTRACT.md): minting one-use setup codes and
// listing the workspace nodes. Errors are treated as transient.
type GatewayStatus interface {
	SetupCode(ctx context.Context, rev state.Revision, gw Endpoint) (code string, expiresAtMs int64, err error)
	Nodes(ctx context.Context, rev state.Revision, gw Endpoint) ([]Node, error)
}

// HTTPGatewayStatus calls the serving Gateway Pod's status server
// (http://<podIP>:<Port>) with the per-Agent status bearer it reads from
// the Agent-owned password Secret (key contract.SecretStatusToken) the driver created
// and projected into the Gateway as OCE_STATUS_TOKEN_FILE. It dials the
// Pod rather than the Service because before activation the Gateway
// Service carries its inactive selector and has no endpoints.
type HTTPGatewayStatus struct {
	Client kubernetes.Interface
	HTTP   *http.Client // nil: a client with StatusRequestTimeout
	Port   int          // 0: contract.StatusPort
}

func (h *HTTPGatewayStatus) base(gw Endpoint) (string, error) {
	if gw.PodIP == "" {
		return "", fmt.Errorf("%w: gateway pod %s/%s has no IP yet", ErrGatewayStatus, gw.Namespace, gw.Pod)
	}
	port := h.Port
	if port == 0 {
		port = contract.StatusPort
	}
	return "http://" + net.JoinHostPort(gw.PodIP, strconv.Itoa(port)), nil
}

func (h *HTTPGatewayStatus) do(ctx context.Context, method string, gw Endpoint, path string, out any) error {
	code, body, err := h.call(ctx, gw, method, path, nil, 1<<20)
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return fmt.Errorf("%w: %s %s: HTTP %d", ErrGatewayStatus, method, path, code)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%w: %s %s: decode: %w", ErrGatewayStatus, method, path, err)
	}
	return nil
}

// Call sends one request to the Gateway Pod's status server with the status
// bearer and returns the answer's status and body (at most limit bytes).
func (h *HTTPGatewayStatus) Call(ctx context.Context, gw Endpoint, method, path string, reqBody []byte) (int, []byte, error) {
	return h.call(ctx, gw, method, path, reqBody, compute.MaxGatewayAnswer)
}

func (h *HTTPGatewayStatus) call(ctx context.Context, gw Endpoint, method, path string, reqBody []byte, limit int64) (int, []byte, error) {
	hc := h.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: StatusRequestTimeout}
	}
	var rd io.Reader
	if reqBody != nil {
		rd = bytes.NewReader(reqBody)
	}
	resp, err := h.request(ctx, hc, method, gw, path, rd)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s %s: %w", ErrGatewayStatus, method, path, err)
	}
	return resp.StatusCode, body, nil
}

// request sends one request to the Gateway Pod's status server with the
// status bearer and hc, and returns the open response, whatever its status.
func (h *HTTPGatewayStatus) request(ctx context.Context, hc *http.Client, method string, gw Endpoint, path string, body io.Reader) (*http.Response, error) {
	base, err := h.base(gw)
	if err != nil {
		return nil, err
	}
	s, err := h.Client.CoreV1().Secrets(gw.Namespace).Get(ctx, gw.TokenSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: status token secret %s/%s is missing", ErrGatewayStatus, gw.Namespace, gw.TokenSecret)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read status token: %w", ErrGatewayStatus, err)
	}
	tok := bytes.TrimSpace(s.Data[contract.SecretStatusToken])
	if len(tok) == 0 {
		return nil, fmt.Errorf("%w: status token secret %s/%s has no %s", ErrGatewayStatus, gw.Namespace, gw.TokenSecret, contract.SecretStatusToken)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGatewayStatus, err)
	}
	req.Header.Set("Authorization", "Bearer "+string(tok))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrGatewayStatus, method, path, err)
	}
	return resp, nil
}

// GatewayChatter is implemented by a GatewayStatus that can run a turn
// through the Gateway's supervisor (contract.RouteChat).
type GatewayChatter interface {
	Chat(ctx context.Context, gw Endpoint, req contract.ChatRequest, delta func(string)) (string, error)
}

var _ GatewayChatter = (*HTTPGatewayStatus)(nil)

// Chat implements GatewayChatter: POST contract.RouteChat, the events read
// as they stream (the turn may take minutes: no whole-request timeout; ctx
// bounds it). A failed turn is a *compute.TurnError.
func (h *HTTPGatewayStatus) Chat(ctx context.Context, gw Endpoint, req contract.ChatRequest, delta func(string)) (string, error) {
	hc := &http.Client{}
	if h.HTTP != nil {
		hc.Transport = h.HTTP.Transport
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	resp, err := h.request(ctx, hc, http.MethodPost, gw, contract.RouteChat, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%w: POST %s: HTTP %d", ErrGatewayStatus, contract.RouteChat, resp.StatusCode)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev contract.ChatEvent
		if err := dec.Decode(&ev); err != nil {
			return "", &compute.TurnError{Code: contract.ChatDisconnected, Message: "the gateway's stream ended early: " + err.Error()}
		}
		switch {
		case ev.Code != "":
			return "", &compute.TurnError{Code: ev.Code, Message: ev.Message}
		case ev.Done:
			return ev.Reply, nil
		case ev.Delta != "" && delta != nil:
			delta(ev.Delta)
		}
	}
}

// SetupCode implements GatewayStatus (POST contract.RouteSetupCode).
func (h *HTTPGatewayStatus) SetupCode(ctx context.Context, _ state.Revision, gw Endpoint) (string, int64, error) {
	var r contract.SetupCodeResponse
	if err := h.do(ctx, http.MethodPost, gw, contract.RouteSetupCode, &r); err != nil {
		return "", 0, err
	}
	if r.SetupCode == "" || r.ExpiresAtMs <= 0 {
		return "", 0, fmt.Errorf("%w: setup-code response lacks setupCode or expiresAtMs", ErrGatewayStatus)
	}
	return r.SetupCode, r.ExpiresAtMs, nil
}

// Nodes implements GatewayStatus (GET contract.RouteNodes).
func (h *HTTPGatewayStatus) Nodes(ctx context.Context, _ state.Revision, gw Endpoint) ([]Node, error) {
	var r contract.NodesResponse
	if err := h.do(ctx, http.MethodGet, gw, contract.RouteNodes, &r); err != nil {
		return nil, err
	}
	return r.Nodes, nil
}
