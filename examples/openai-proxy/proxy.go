package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
	slerrors "github.com/sluicehq/sluice/errors"
)

const (
	maxRequestBody  = 16 << 20 // a chat request with inline images can be large
	maxResponseBody = 64 << 20
)

// forwardedHeaders are the client's headers the upstream receives.
var forwardedHeaders = []string{"Authorization", "OpenAI-Organization", "OpenAI-Project", "User-Agent"}

// hopHeaders are not copied from the upstream's response.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
}

// proxy is the chat completions handler: it reserves, forwards and reconciles.
type proxy struct {
	limits   sluice.Reserver
	endpoint string // upstream chat completions URL
	client   *http.Client
}

// newProxy returns the proxy's handler. upstream is the base URL of an
// OpenAI-compatible API ("https://api.openai.com/v1"); client sends the
// upstream requests (nil: a client without timeout, since streams are long).
func newProxy(limits sluice.Reserver, upstream string, client *http.Client) (http.Handler, error) {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai-proxy: upstream %q is not an http(s) base URL", upstream)
	}
	if client == nil {
		client = &http.Client{}
	}
	p := &proxy{limits: limits, endpoint: strings.TrimSuffix(u.String(), "/") + "/chat/completions", client: client}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", p)
	return mux, nil
}

// callerKey is the caller dimension's value: "key-" and 16 hex digits of the
// SHA-256 of the bearer token, so that the key itself never appears in limit
// keys, 429 bodies or telemetry; "anonymous" without a bearer token.
func callerKey(authorization string) string {
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return "anonymous"
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return "key-" + hex.EncodeToString(sum[:8])
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", "the request body is larger than "+strconv.Itoa(maxRequestBody)+" bytes")
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "reading the request body: "+err.Error())
		return
	}
	req, perr := parseRequest(data)
	if perr != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", perr.param, perr.Error())
		return
	}
	keys := sluice.NewKeys("qualifiedModelId", req.model, "caller", callerKey(r.Header.Get("Authorization")))
	res, d, err := p.limits.Reserve(r.Context(), keys, req.estimate())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "rate limiter unavailable")
		return
	}
	if !d.Allowed {
		_ = slerrors.Response{Format: slerrors.OpenAI}.Write(w, d.Err())
		return
	}
	// Until a path below decides otherwise, the request costs its prompt
	// estimate (what a failure after forwarding is charged); the deferred
	// Reconcile also runs if something panics.
	charge := req.prompt
	defer func() { _ = res.Reconcile(clampInt(charge)) }()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(req.body))
	if err != nil {
		charge = 0
		writeError(w, http.StatusInternalServerError, "server_error", "", "building the upstream request")
		return
	}
	for _, h := range forwardedHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			up.Header[h] = v
		}
	}
	up.Header.Set("Content-Type", "application/json")
	if req.stream {
		up.Header.Set("Accept", "text/event-stream")
	}
	resp, err := p.client.Do(up)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client left: charged the prompt estimate
		}
		charge = 0 // nothing reached the model
		writeError(w, http.StatusBadGateway, "upstream_error", "", "the upstream could not be reached")
		return
	}
	defer resp.Body.Close()

	if resp.StatusCode >= 500 {
		charge = 0
		writeError(w, http.StatusBadGateway, "upstream_error", "", "the upstream answered "+strconv.Itoa(resp.StatusCode))
		return
	}
	copyHeaders(w.Header(), resp.Header)
	if resp.StatusCode >= 300 {
		// The upstream refused the request (bad parameter, bad key, its own
		// rate limit): relayed as is, no tokens charged.
		charge = 0
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		charge = p.relayStream(w, resp, req, cancel)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, http.StatusBadGateway, "upstream_error", "", "reading the upstream response failed")
		}
		return // the upstream may have generated the answer: prompt estimate
	}
	u, chars := completionChars(body)
	if u != nil && u.total() > 0 {
		charge = u.total()
	} else {
		charge = req.prompt + textTokens(chars)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// relayStream relays a streaming response and returns its cost: the usage
// of its final chunk, or else the prompt estimate plus the tokens of the
// text relayed (client gone, upstream broke off, or no usage sent).
func (p *proxy) relayStream(w http.ResponseWriter, resp *http.Response, req *chatRequest, cancel context.CancelFunc) int64 {
	rc := http.NewResponseController(w)
	w.WriteHeader(resp.StatusCode)
	_ = rc.Flush()
	res, err := relaySSE(w, rc.Flush, resp.Body, !req.wantUsage)
	if err != nil {
		cancel() // a client write failed, or the upstream broke: stop the upstream
	}
	if res.usage != nil && res.usage.total() > 0 { // the upstream's count wins
		return res.usage.total()
	}
	return req.prompt + textTokens(res.chars)
}

func copyHeaders(dst, src http.Header) {
	for k, v := range src {
		if !hopHeaders[k] {
			dst[k] = v
		}
	}
}

// writeError writes an OpenAI-shaped error.
func writeError(w http.ResponseWriter, status int, typ, param, msg string) {
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	e.Error.Message, e.Error.Type = msg, typ
	if param != "" {
		e.Error.Param = &param
	}
	body, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
