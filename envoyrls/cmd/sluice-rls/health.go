package main

import (
	"net/http"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The components of the health, as envoyproxy/ratelimit names them.
const (
	healthRedis   = "redis"
	healthConfig  = "config"
	healthSigterm = "sigterm"
)

// healthName is the service name of the gRPC health status, theirs.
const healthName = "ratelimit"

// healthState is healthy while every component it tracks is: it answers
// /healthcheck (200 "OK", else 500 naming the failing components) and sets
// the gRPC health service's status for "" and "ratelimit".
type healthState struct {
	grpc *health.Server

	mu   sync.Mutex
	comp map[string]bool
}

func newHealth(components ...string) *healthState {
	h := &healthState{grpc: health.NewServer(), comp: map[string]bool{healthSigterm: true}}
	for _, c := range components {
		h.comp[c] = false
	}
	h.publish()
	return h
}

// set marks a tracked component healthy or not; an untracked one is ignored.
func (h *healthState) set(component string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, tracked := h.comp[component]; !tracked || cur == ok {
		return
	}
	h.comp[component] = ok
	h.publishLocked()
}

func (h *healthState) publish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked()
}

func (h *healthState) publishLocked() {
	st := healthpb.HealthCheckResponse_SERVING
	if len(h.failingLocked()) > 0 {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	h.grpc.SetServingStatus("", st)
	h.grpc.SetServingStatus(healthName, st)
}

func (h *healthState) failingLocked() []string {
	var bad []string
	for c, ok := range h.comp {
		if !ok {
			bad = append(bad, c)
		}
	}
	sort.Strings(bad)
	return bad
}

func (h *healthState) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	bad := h.failingLocked()
	h.mu.Unlock()
	if len(bad) > 0 {
		http.Error(w, "unhealthy: "+strings.Join(bad, ", "), http.StatusInternalServerError)
		return
	}
	w.Write([]byte("OK"))
}
