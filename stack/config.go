package stack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/hashmatch"
	"github.com/sluicehq/sluice/match"
)

// Config is a complete rate-limit configuration: the customer-defined limits
// and, optionally, a second layer of service-managed limits evaluated after
// them. A request must pass both layers.
//
// The JSON form mirrors the gateway's API types, so a definition written for
// the gateway loads unchanged (see Parse for the accepted shapes).
type Config struct {
	RateLimits    []RateLimit `json:"rateLimits"`
	ServiceLimits []RateLimit `json:"serviceLimits,omitempty"`
}

// RateLimit is one rate limit: ordered dimension keys and the entries that
// give rates for combinations of their values.
type RateLimit struct {
	// RateLimitID names the limit: 2–64 characters of [A-Za-z0-9._-], unique
	// across the configuration. It appears in limit keys and telemetry.
	RateLimitID string `json:"rateLimitId"`
	// Description is free text, at most 512 characters.
	Description string `json:"description,omitempty"`
	// DimensionKeys are the request dimensions this limit is keyed by, in
	// order (1–10), e.g. ["targetName", "toolName"].
	DimensionKeys []string `json:"dimensionKeys"`
	// Entries give the rates (1–1000); see Entry.
	Entries []Entry `json:"entries"`
	// Shadow evaluates and reports the limit without ever denying: a request
	// it would deny is allowed and named in Decision.Shadowed. A sluice
	// extension for rolling out new limits.
	Shadow bool `json:"shadow,omitempty"`
}

// Entry gives rates for one combination of dimension values. Dimensions holds
// one value per dimension key; "*" in trailing positions matches any value
// and gives each distinct value its own bucket, while an exact entry is one
// bucket shared by every request it matches.
type Entry struct {
	Dimensions  map[string]string `json:"dimensions"`
	Requests    []Rate            `json:"requests,omitempty"`
	Tokens      []Rate            `json:"tokens,omitempty"`
	Connections []Rate            `json:"connections,omitempty"`
}

// Rate is a sustained rate: Rate units per Period. The bucket's capacity
// (burst) is Rate unless Burst is set. Rate 0 blocks every matching request.
type Rate struct {
	// Rate is 0 to 10,000,000 units per Period.
	Rate int64 `json:"rate"`
	// Period is Second, Minute, Hour or Day.
	Period Unit `json:"period"`
	// Burst, when positive, sets the bucket capacity; by default it equals
	// Rate (a full period's worth). A sluice extension.
	Burst int64 `json:"burst,omitempty"`
}

// Unit is a unit of time a rate is expressed in. It is the one unit type of
// sluice: a Stack's Rate.Period and envoyrls' rules both use it.
//
// A Stack's configuration accepts Second, Minute, Hour and Day (the gateway
// knows second and minute; hour and day are sluice extensions that
// envoyproxy/ratelimit's configurations use); Validate reports any other
// unit at its path. Week, Month and Year are envoyproxy/ratelimit's longer
// units, for envoyrls, with fixed lengths (7, 30 and 365 days) as its
// windows have.
type Unit string

// Units.
const (
	Second Unit = "second"
	Minute Unit = "minute"
	Hour   Unit = "hour"
	Day    Unit = "day"
	Week   Unit = "week"
	Month  Unit = "month"
	Year   Unit = "year"
)

// Duration returns the unit's length, or 0 for an unknown unit.
func (u Unit) Duration() time.Duration {
	switch u {
	case Second:
		return time.Second
	case Minute:
		return time.Minute
	case Hour:
		return time.Hour
	case Day:
		return 24 * time.Hour
	case Week:
		return 7 * 24 * time.Hour
	case Month:
		return 30 * 24 * time.Hour
	case Year:
		return 365 * 24 * time.Hour
	}
	return 0
}

// stackUnit reports whether a Stack's configuration accepts u.
func stackUnit(u Unit) bool {
	return u == Second || u == Minute || u == Hour || u == Day
}

// Limits of a configuration, as the gateway enforces them.
const (
	MaxRateLimits     = 50
	MaxRate           = 10_000_000
	MaxDescription    = 512
	MaxConfigBytes    = 8 << 20
	maxRatesPerMetric = 16
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{2,64}$`)

// ConfigError is the error New, Load, Parse, Validate, Reload and ReloadJSON
// return for an invalid configuration: the problems with their paths (e.g.
// "rateLimits[1].entries[0].requests[0].period"). Its Error spells out the
// first 20 problems and counts the rest; its Problems field holds up to
// 2,000 of them and Count says how many there were.
// Find it with errors.As:
//
//	var ce *stack.ConfigError
//	if errors.As(err, &ce) {
//		for _, p := range ce.Problems { … }
//	}
//
// It is the same type as match.ConfigError.
type ConfigError = match.ConfigError

// Problem is one entry of ConfigError.Problems: a path and what is wrong
// there. It is the same type as match.Problem.
type Problem = match.Problem

// Validate checks c and returns a *ConfigError listing every problem
// with its path (e.g. "rateLimits[1].entries[0].requests[0].period"), or nil.
func (c *Config) Validate() error {
	var errs ConfigError
	c.validate(&errs)
	return errs.Err()
}

func (c *Config) validate(errs *ConfigError) {
	ids := map[string]string{}
	layer := func(name string, limits []RateLimit) {
		if len(limits) > MaxRateLimits {
			errs.Add(name, "%d rate limits, at most %d are allowed", len(limits), MaxRateLimits)
		}
		for i := range limits {
			p := name + "[" + strconv.Itoa(i) + "]"
			rl := &limits[i]
			if !idPattern.MatchString(rl.RateLimitID) {
				errs.Add(p+".rateLimitId", "%q must be 2–64 characters of A-Z a-z 0-9 . _ -", rl.RateLimitID)
			} else if prev, dup := ids[rl.RateLimitID]; dup {
				errs.Add(p+".rateLimitId", "duplicate id %q (also at %s)", rl.RateLimitID, prev)
			} else {
				ids[rl.RateLimitID] = p
			}
			if len(rl.Description) > MaxDescription {
				errs.Add(p+".description", "%d characters, at most %d are allowed", len(rl.Description), MaxDescription)
			}
			rl.validateEntries(errs, p)
		}
	}
	layer("rateLimits", c.RateLimits)
	layer("serviceLimits", c.ServiceLimits)
}

func (rl *RateLimit) validateEntries(errs *ConfigError, p string) {
	keyIndex := make(map[string]bool, len(rl.DimensionKeys))
	for _, k := range rl.DimensionKeys {
		keyIndex[k] = true
	}
	// Paths are built only for problems: a valid 50,000-entry
	// configuration validates without building any string.
	entryPath := func(j int) string { return p + ".entries[" + strconv.Itoa(j) + "]" }
	tuples := make([][]string, 0, len(rl.Entries))
	flat := make([]string, len(rl.Entries)*len(rl.DimensionKeys))
	for j := range rl.Entries {
		e := &rl.Entries[j]
		unknown := false
		for name := range e.Dimensions {
			if !keyIndex[name] {
				unknown = true
			}
		}
		if unknown { // report in a stable order
			for _, name := range sortedKeys(e.Dimensions) {
				if !keyIndex[name] {
					errs.Add(entryPath(j)+".dimensions."+name, "%q is not one of the dimension keys %q", name, rl.DimensionKeys)
				}
			}
		}
		tuple := flat[j*len(rl.DimensionKeys) : (j+1)*len(rl.DimensionKeys) : (j+1)*len(rl.DimensionKeys)]
		for k, name := range rl.DimensionKeys {
			v, ok := e.Dimensions[name]
			if !ok && name != "" {
				errs.Add(entryPath(j)+".dimensions", "no value for dimension key %q", name)
				v = match.Wildcard // keep checking the rest of the entry
			}
			tuple[k] = v
		}
		tuples = append(tuples, tuple)
		n := len(e.Requests) + len(e.Tokens) + len(e.Connections)
		if n == 0 {
			errs.Add(entryPath(j), "no rates: give at least one of requests, tokens, connections")
		}
		validateRates(errs, entryPath, j, ".requests", e.Requests)
		validateRates(errs, entryPath, j, ".tokens", e.Tokens)
		validateRates(errs, entryPath, j, ".connections", e.Connections)
	}
	hashmatch.Validate(errs.Add, p, rl.DimensionKeys, tuples)
}

func validateRates(errs *ConfigError, entryPath func(int) string, j int, metric string, rates []Rate) {
	if len(rates) > maxRatesPerMetric {
		errs.Add(entryPath(j)+metric, "%d rates, at most %d are allowed", len(rates), maxRatesPerMetric)
	}
	for i, r := range rates {
		rp := func() string { return entryPath(j) + metric + "[" + strconv.Itoa(i) + "]" }
		if r.Rate < 0 || r.Rate > MaxRate {
			errs.Add(rp()+".rate", "%d is out of range 0 to %d", r.Rate, MaxRate)
		}
		if !stackUnit(r.Period) {
			errs.Add(rp()+".period", "%q must be %q, %q, %q or %q", string(r.Period), Second, Minute, Hour, Day)
		}
		if r.Burst < 0 || r.Burst > MaxRate*60 {
			errs.Add(rp()+".burst", "%d is out of range 0 to %d", r.Burst, MaxRate*60)
		}
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Parse reads a configuration in the gateway's JSON shape. It accepts an
// object {"rateLimits": [...], "serviceLimits": [...]}, a single rate-limit
// object (as the gateway's CreateRateLimit takes it), or an array of them.
// The object must have "rateLimits" ({} is an error naming it, so that a
// document that lost its limits never loads as "no limits"); an explicit
// empty list, {"rateLimits": []}, is a valid configuration without limits.
//
// Every problem is reported at once in a *ConfigError with its path:
// invalid JSON (with line and column), unknown or mistyped fields, bad
// periods, rates out of range, non-trailing wildcards, oversize
// configurations. Parse never panics.
func Parse(data []byte) (Config, error) {
	var errs ConfigError
	if len(data) > MaxConfigBytes {
		errs.Add("", "configuration is %d bytes, at most %d are allowed", len(data), MaxConfigBytes)
		return Config{}, &errs
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		errs.Add(jsonErrorPath(data, err), "invalid JSON: %v", jsonErrorText(err))
		return Config{}, &errs
	}
	if _, err := dec.Token(); err != io.EOF {
		errs.Add("", "unexpected data after the JSON value")
		return Config{}, &errs
	}
	var cfg Config
	switch v := root.(type) {
	case []any:
		cfg.RateLimits = parseLimits(&errs, "rateLimits", v)
	case map[string]any:
		if _, single := v["rateLimitId"]; single {
			cfg.RateLimits = []RateLimit{parseLimit(&errs, "rateLimits[0]", v)}
			break
		}
		for _, k := range sortedAnyKeys(v) {
			switch k {
			case "rateLimits", "serviceLimits":
				arr, ok := v[k].([]any)
				if !ok {
					errs.Add(k, "must be an array of rate limits, got %s", jsonType(v[k]))
					continue
				}
				limits := parseLimits(&errs, k, arr)
				if k == "rateLimits" {
					cfg.RateLimits = limits
				} else {
					cfg.ServiceLimits = limits
				}
			default:
				errs.Add(k, "unknown field")
			}
		}
		if _, ok := v["rateLimits"]; !ok {
			// A document that lost its limits (a typo in the key, an
			// empty file of "{}") must not load as "no limits".
			errs.Add("rateLimits", `is required (write "rateLimits": [] for a configuration without customer limits)`)
		}
	default:
		errs.Add("", "must be an object or an array of rate limits, got %s", jsonType(root))
	}
	cfg.validate(&errs)
	if err := errs.Err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func parseLimits(errs *ConfigError, p string, arr []any) []RateLimit {
	out := make([]RateLimit, 0, len(arr))
	for i, v := range arr {
		ip := p + "[" + strconv.Itoa(i) + "]"
		obj, ok := v.(map[string]any)
		if !ok {
			errs.Add(ip, "must be a rate-limit object, got %s", jsonType(v))
			continue
		}
		out = append(out, parseLimit(errs, ip, obj))
	}
	return out
}

func parseLimit(errs *ConfigError, p string, obj map[string]any) RateLimit {
	var rl RateLimit
	for _, k := range sortedAnyKeys(obj) {
		v := obj[k]
		kp := p + "." + k
		switch k {
		case "rateLimitId":
			rl.RateLimitID = str(errs, kp, v)
		case "description":
			rl.Description = str(errs, kp, v)
		case "shadow":
			b, ok := v.(bool)
			if !ok {
				errs.Add(kp, "must be true or false, got %s", jsonType(v))
			}
			rl.Shadow = b
		case "dimensionKeys":
			arr, ok := v.([]any)
			if !ok {
				errs.Add(kp, "must be an array of strings, got %s", jsonType(v))
				continue
			}
			for i, x := range arr {
				rl.DimensionKeys = append(rl.DimensionKeys, str(errs, kp+"["+strconv.Itoa(i)+"]", x))
			}
		case "entries":
			arr, ok := v.([]any)
			if !ok {
				errs.Add(kp, "must be an array of entries, got %s", jsonType(v))
				continue
			}
			for i, x := range arr {
				ip := kp + "[" + strconv.Itoa(i) + "]"
				eo, ok := x.(map[string]any)
				if !ok {
					errs.Add(ip, "must be an entry object, got %s", jsonType(x))
					continue
				}
				rl.Entries = append(rl.Entries, parseEntry(errs, ip, eo))
			}
		default:
			errs.Add(kp, "unknown field")
		}
	}
	for _, req := range []struct {
		name    string
		present bool
	}{{"rateLimitId", obj["rateLimitId"] != nil}, {"dimensionKeys", obj["dimensionKeys"] != nil}, {"entries", obj["entries"] != nil}} {
		if !req.present {
			errs.Add(p+"."+req.name, "is required")
		}
	}
	return rl
}

func parseEntry(errs *ConfigError, p string, obj map[string]any) Entry {
	var e Entry
	for _, k := range sortedAnyKeys(obj) {
		v := obj[k]
		kp := p + "." + k
		switch k {
		case "dimensions":
			m, ok := v.(map[string]any)
			if !ok {
				errs.Add(kp, "must be an object of dimension values, got %s", jsonType(v))
				continue
			}
			e.Dimensions = make(map[string]string, len(m))
			bad := false
			for dk, dv := range m {
				sv, ok := dv.(string)
				e.Dimensions[dk] = sv
				bad = bad || !ok
			}
			if bad { // report in a stable order
				for _, dk := range sortedAnyKeys(m) {
					str(errs, kp+"."+dk, m[dk])
				}
			}
		case "requests":
			e.Requests = parseRates(errs, kp, v)
		case "tokens":
			e.Tokens = parseRates(errs, kp, v)
		case "connections":
			e.Connections = parseRates(errs, kp, v)
		default:
			errs.Add(kp, "unknown field")
		}
	}
	return e
}

func parseRates(errs *ConfigError, p string, v any) []Rate {
	arr, ok := v.([]any)
	if !ok {
		errs.Add(p, "must be an array of {rate, period}, got %s", jsonType(v))
		return nil
	}
	out := make([]Rate, 0, len(arr))
	for i, x := range arr {
		ip := p + "[" + strconv.Itoa(i) + "]"
		obj, ok := x.(map[string]any)
		if !ok {
			errs.Add(ip, "must be an object {rate, period}, got %s", jsonType(x))
			continue
		}
		var r Rate
		for _, k := range sortedAnyKeys(obj) {
			kp := ip + "." + k
			switch k {
			case "rate":
				r.Rate = integer(errs, kp, obj[k])
			case "burst":
				r.Burst = integer(errs, kp, obj[k])
			case "period":
				r.Period = Unit(str(errs, kp, obj[k]))
			default:
				errs.Add(kp, "unknown field")
			}
		}
		if _, ok := obj["rate"]; !ok {
			errs.Add(ip+".rate", "is required")
		}
		if _, ok := obj["period"]; !ok {
			errs.Add(ip+".period", "is required")
			r.Period = Second // reported; avoid a second message
		}
		out = append(out, r)
	}
	return out
}

func str(errs *ConfigError, p string, v any) string {
	s, ok := v.(string)
	if !ok {
		errs.Add(p, "must be a string, got %s", jsonType(v))
	}
	return s
}

func integer(errs *ConfigError, p string, v any) int64 {
	n, ok := v.(json.Number)
	if !ok {
		errs.Add(p, "must be a number, got %s", jsonType(v))
		return 0
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		errs.Add(p, "%s is not a whole number in range", n)
		return 0
	}
	return i
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func sortedAnyKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonErrorPath turns a decoder error's byte offset into "line L, column C".
func jsonErrorPath(data []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset - 1 // the offending byte, not the one after it
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return ""
	}
	line, col := 1, 1
	for _, c := range data[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return "line " + strconv.Itoa(line) + ", column " + strconv.Itoa(col)
}

func jsonErrorText(err error) string {
	if errors.Is(err, io.EOF) {
		return "empty input"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return err.Error()
}
