package envoyrls

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/match"
	"github.com/sluicehq/sluice/stack"
)

// Config is a loaded rate limit configuration: the descriptor trees of
// envoyproxy/ratelimit's YAML files, one per domain, and optionally limits in
// sluice's gateway JSON keyed by descriptor key names. It is immutable once
// loaded and safe for concurrent use.
type Config struct {
	domains map[string]*node
	gateway []gatewayLimit
	files   []string
}

// Limits on what a configuration may hold, so that a file cannot make the
// server use unbounded memory.
const (
	// maxConfigBytes is the largest file Load reads.
	maxConfigBytes = 8 << 20
	// maxDepth is the deepest nesting of descriptors.
	maxDepth = 16
	// maxFiles is the most files a directory may hold.
	maxFiles = 1000
)

// maxPeriod is the longest period a rule may have (unit × multiplier).
const maxPeriod = 400 * 24 * time.Hour

// Rule is the rate_limit of one descriptor node.
type Rule struct {
	// Name is the rule's name (rate_limit.name), "" when it has none.
	Name string
	// Path locates the node: the domain and the key or key_value of each
	// level, joined by ".", as envoyproxy/ratelimit names its stats
	// ("edge.remote_address.path_/login").
	Path string
	// RequestsPerUnit units refill every Unit; it is also the burst.
	RequestsPerUnit uint32
	// Unit is written in any case in the file ("second", "SECOND") and
	// stored in lower case; every stack.Unit is accepted.
	Unit stack.Unit
	// UnitMultiplier makes the period UnitMultiplier units (30 seconds,
	// 5 minutes); it is 1 when the file does not say.
	UnitMultiplier uint32
	// Unlimited rules never limit.
	Unlimited bool
	// Shadow rules are evaluated and reported but never deny.
	Shadow bool
	// Replaces names the rules this one drops when both match a request.
	Replaces []string
	// QuotaMode (quota_mode) makes the rule a quota: over its limit it
	// reports OVER_LIMIT in its descriptor's status, but the request is
	// denied by quotas only when every quota descriptor of the request is
	// over (see Server.SetQuotaMode for the global mode).
	QuotaMode bool
	// Metadata (metadata) is merged into the response's dynamic metadata,
	// under "metadata", when the rule's descriptor is not over, as
	// envoyproxy/ratelimit does. Values are strings, numbers, booleans,
	// lists and mappings.
	Metadata map[string]any

	// scope identifies the node without ambiguity (each key and value
	// length-prefixed; Path confuses key "a_b" with key "a", value "b").
	scope string
}

// ID returns the rule's name, or its Path when it has none: what metrics,
// headers and the response's dynamic metadata call it.
func (r *Rule) ID() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Path
}

// node is one level of a domain's descriptor tree.
type node struct {
	exact    map[kv]*node // key and value
	prefix   []prefixNode // key and a value ending in "*", in file order
	defaults map[string]*node
	rule     *Rule
}

type kv struct{ k, v string }

// prefixNode is a value pattern with "*" wildcards ("/api/*", "a*b*c"):
// each "*" matches any run of bytes, possibly empty.
type prefixNode struct {
	k     string
	parts []string // the pattern split on "*"
	n     *node
	// shared (share_threshold), the pattern itself, when every value it
	// matches shares one bucket instead of one per value; "" otherwise.
	shared string
}

// wildcardMatch reports whether v matches the pattern split on "*" into
// parts (at least two).
func wildcardMatch(parts []string, v string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(v) < len(first)+len(last) || !strings.HasPrefix(v, first) || !strings.HasSuffix(v, last) {
		return false
	}
	mid := v[len(first) : len(v)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(mid, p)
		if i < 0 {
			return false
		}
		mid = mid[i+len(p):]
	}
	return true
}

func newNode() *node { return &node{} }

func (n *node) leaf() bool { return len(n.exact) == 0 && len(n.prefix) == 0 && len(n.defaults) == 0 }

// childShared finds the node for one descriptor entry: the exact key and
// value, else a wildcard value ("/api/*"), else the key alone (a default).
// For a wildcard with share_threshold it also reports the pattern every
// value it matches shares.
func (n *node) childShared(k, v string) (*node, string) {
	if c := n.exact[kv{k, v}]; c != nil {
		return c, ""
	}
	for i := range n.prefix {
		if p := &n.prefix[i]; p.k == k && wildcardMatch(p.parts, v) {
			return p.n, p.shared
		}
	}
	return n.defaults[k], ""
}

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.domains))
	for d := range c.domains {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// Files returns the files the configuration was loaded from.
func (c *Config) Files() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.files)
}

// Lookup walks domain's tree with the entries of one descriptor, as
// envoyproxy/ratelimit does: at each level the exact key and value, else a
// value prefix, else the key alone; the rule of the node the walk ends on
// applies only when the walk used every entry. It returns nil when no rule
// applies (an unknown domain, a walk that ends early, a node without
// rate_limit).
func (c *Config) Lookup(domain string, entries ...[2]string) *Rule {
	return c.lookup(domain, entries, nil)
}

// lookup is Lookup that also writes, into shared[i], the pattern entry i
// shares its bucket under (share_threshold), "" for none.
func (c *Config) lookup(domain string, entries [][2]string, shared []string) *Rule {
	if c == nil {
		return nil
	}
	n := c.domains[domain]
	if n == nil {
		return nil
	}
	for i, e := range entries {
		var pat string
		n, pat = n.childShared(e[0], e[1])
		if n == nil {
			return nil
		}
		if shared != nil {
			shared[i] = pat
		}
		if i == len(entries)-1 {
			return n.rule
		}
		if n.leaf() {
			return nil
		}
	}
	return nil
}

// Load reads path: an envoyproxy/ratelimit YAML file, a sluice gateway JSON
// file (ending in .json), or a directory of them (its *.yaml, *.yml and
// *.json files; names starting with "." are skipped, as Kubernetes
// ConfigMap mounts need). Every problem of every file is reported in one
// *stack.ConfigError, each with the file, the line and the path inside it.
func Load(path string) (*Config, error) {
	files, err := readPath(path)
	if err != nil {
		return nil, err
	}
	return Parse(files)
}

// readPath reads the configuration files at path (a file or a directory).
func readPath(path string) (map[string][]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		data, err := readFile(path)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{path: data}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !isConfigName(name) {
			continue
		}
		full := filepath.Join(path, name)
		st, err := os.Stat(full) // follows symlinks
		if err != nil {
			return nil, err
		}
		if st.IsDir() {
			continue
		}
		if len(files) >= maxFiles {
			return nil, fmt.Errorf("envoyrls: %s holds more than %d configuration files", path, maxFiles)
		}
		data, err := readFile(full)
		if err != nil {
			return nil, err
		}
		files[full] = data
	}
	return files, nil
}

func isConfigName(name string) bool {
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxConfigBytes+1)); err != nil {
		return nil, err
	}
	if buf.Len() > maxConfigBytes {
		return nil, &match.ConfigError{Problems: []match.Problem{{Path: path, Message: fmt.Sprintf("larger than %d bytes", maxConfigBytes)}}}
	}
	return buf.Bytes(), nil
}

// Parse builds a Config from files, name → contents. A name ending in
// ".json" is sluice's gateway JSON (see stack.Parse): its limits apply to
// every domain, to a descriptor whose keys are the limit's dimension keys in
// order, with sluice's entry matching (exact values, then trailing "*").
// Any other name is envoyproxy/ratelimit's YAML: domain, descriptors (key,
// value, rate_limit, descriptors, shadow_mode, quota_mode, detailed_metric,
// value_to_metric, share_threshold, metadata), rate_limit (unit,
// requests_per_unit, unit_multiplier, unlimited, name, replaces): every key
// its loader accepts. Files are read in
// name order. Parse never panics.
func Parse(files map[string][]byte) (*Config, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	c := &Config{domains: map[string]*node{}, files: names}
	var errs match.ConfigError
	domainFile := map[string]string{}
	for _, name := range names {
		data := files[name]
		if len(data) > maxConfigBytes {
			errs.Add(name, "larger than %d bytes", maxConfigBytes)
			continue
		}
		if strings.HasSuffix(name, ".json") {
			c.parseGateway(&errs, name, data)
			continue
		}
		p := &yamlParser{errs: &errs, file: name}
		domain, root, line := p.file_(data)
		if root == nil {
			continue
		}
		if prev, dup := domainFile[domain]; dup {
			p.add(line, "domain", "duplicate domain %q (also in %s)", domain, prev)
			continue
		}
		domainFile[domain] = name
		c.domains[domain] = root
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

type yamlParser struct {
	errs *match.ConfigError
	file string
}

func (p *yamlParser) add(line int, path, format string, args ...any) {
	loc := p.file
	if line > 0 {
		loc += ":" + strconv.Itoa(line)
	}
	if path != "" {
		loc += ": " + path
	}
	p.errs.Add(loc, format, args...)
}

// file_ parses a whole file; root is nil when it has errors.
func (p *yamlParser) file_(data []byte) (domain string, root *node, domainLine int) {
	before := p.errs.Count()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(0, "", "empty file: a domain and its descriptors are required")
			return "", nil, 0
		}
		p.add(0, "", "invalid YAML: %s", yamlErrorText(err))
		return "", nil, 0
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.add(extra.Line, "", "a second YAML document; put each domain in its own file")
		return "", nil, 0
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		p.add(0, "", "empty file: a domain and its descriptors are required")
		return "", nil, 0
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		p.add(m.Line, "", "must be a mapping with domain and descriptors, got %s", kindName(m))
		return "", nil, 0
	}
	root = newNode()
	var descs *yaml.Node
	seenDomain := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "domain":
			seenDomain, domainLine = true, v.Line
			domain = p.str(v, "domain")
			if domain == "" && v.Kind == yaml.ScalarNode {
				p.add(v.Line, "domain", "empty domain")
			}
		case "descriptors":
			descs = v
		default:
			p.add(k.Line, k.Value, "unknown key (known: domain, descriptors)")
		}
	}
	if !seenDomain {
		p.add(m.Line, "domain", "a domain is required")
	}
	if descs != nil {
		p.descriptors(root, descs, "descriptors", domain, lp(domain), 1)
	}
	if p.errs.Count() > before {
		return domain, nil, domainLine
	}
	return domain, root, domainLine
}

func (p *yamlParser) descriptors(parent *node, seq *yaml.Node, path, parentKey, parentScope string, depth int) {
	if seq.Kind == yaml.ScalarNode && seq.Tag == "!!null" {
		return
	}
	if seq.Kind != yaml.SequenceNode {
		p.add(seq.Line, path, "must be a list of descriptors, got %s", kindName(seq))
		return
	}
	if depth > maxDepth {
		p.add(seq.Line, path, "descriptors nested deeper than %d levels", maxDepth)
		return
	}
	for i, d := range seq.Content {
		p.descriptor(parent, d, path+"["+strconv.Itoa(i)+"]", parentKey, parentScope, depth)
	}
}

func (p *yamlParser) descriptor(parent *node, d *yaml.Node, path, parentKey, parentScope string, depth int) {
	if d.Kind != yaml.MappingNode {
		p.add(d.Line, path, "must be a descriptor (a mapping with key, value, rate_limit, descriptors), got %s", kindName(d))
		return
	}
	var key, value string
	var rl, children, metaNode *yaml.Node
	shadow, hasKey := false, false
	quota, share := false, false
	for i := 0; i+1 < len(d.Content); i += 2 {
		k, v := d.Content[i], d.Content[i+1]
		kp := path + "." + k.Value
		switch k.Value {
		case "key":
			key, hasKey = p.str(v, kp), true
		case "value":
			value = p.str(v, kp)
		case "rate_limit":
			rl = v
		case "descriptors":
			children = v
		case "shadow_mode":
			shadow = p.boolean(v, kp)
		case "detailed_metric":
			_ = p.boolean(v, kp) // detailed_metric: checked, no effect
		case "quota_mode":
			quota = p.boolean(v, kp)
		case "value_to_metric":
			_ = p.boolean(v, kp) // value_to_metric: checked, no effect
		case "share_threshold":
			share = p.boolean(v, kp)
		case "metadata":
			metaNode = v
		default:
			p.add(k.Line, kp, "unknown key (known: key, value, rate_limit, descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata)")
		}
	}
	var metadata map[string]any
	if metaNode != nil {
		metadata = p.metadata(metaNode, path+".metadata")
	}
	if share && !strings.Contains(value, "*") {
		p.add(d.Line, path+".share_threshold", "share_threshold needs a wildcard value (containing '*'), got %q", value)
	}
	if !hasKey || key == "" {
		p.add(d.Line, path+".key", "descriptor has an empty key")
		return
	}
	full := key
	if value != "" {
		full += "_" + value
	}
	nodePath := parentKey + "." + full
	scope := parentScope + "|" + lp(key) + "=" + lp(value)
	n := newNode()
	dup := false
	switch {
	case value == "":
		if parent.defaults == nil {
			parent.defaults = map[string]*node{}
		}
		dup = parent.defaults[key] != nil
		if !dup {
			parent.defaults[key] = n
		}
	case strings.Contains(value, "*"):
		parts := strings.Split(value, "*")
		for _, q := range parent.prefix {
			dup = dup || (q.k == key && slices.Equal(q.parts, parts))
		}
		if !dup {
			pn := prefixNode{k: key, parts: parts, n: n}
			if share {
				pn.shared = value
			}
			parent.prefix = append(parent.prefix, pn)
		}
	default:
		if parent.exact == nil {
			parent.exact = map[kv]*node{}
		}
		dup = parent.exact[kv{key, value}] != nil
		if !dup {
			parent.exact[kv{key, value}] = n
		}
	}
	if dup {
		p.add(d.Line, path, "duplicate descriptor %q (key %q, value %q)", nodePath, key, value)
	}
	if rl != nil {
		n.rule = p.rule(rl, path+".rate_limit", nodePath)
		if n.rule != nil {
			// detailed_metric and value_to_metric are checked and have no
			// effect: metrics are per rule, never per value (a bound on
			// their series).
			n.rule.Shadow, n.rule.scope = shadow, scope
			n.rule.QuotaMode, n.rule.Metadata = quota, metadata
		}
	}
	if children != nil {
		p.descriptors(n, children, path+".descriptors", nodePath, scope, depth+1)
	}
}

func (p *yamlParser) rule(m *yaml.Node, path, nodePath string) *Rule {
	if m.Kind != yaml.MappingNode {
		p.add(m.Line, path, "must be a mapping (unit, requests_per_unit, unlimited, name, replaces), got %s", kindName(m))
		return nil
	}
	r := &Rule{Path: nodePath, UnitMultiplier: 1}
	var unitNode, replaces *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		kp := path + "." + k.Value
		switch k.Value {
		case "unit":
			unitNode = v
			r.Unit = stack.Unit(strings.ToLower(p.str(v, kp)))
		case "requests_per_unit":
			n, err := strconv.ParseUint(v.Value, 10, 32)
			if v.Kind != yaml.ScalarNode || err != nil {
				p.add(v.Line, kp, "must be a whole number from 0 to %d, got %q", uint32(1<<32-1), v.Value)
			}
			r.RequestsPerUnit = uint32(n)
		case "unit_multiplier":
			n, err := strconv.ParseUint(v.Value, 10, 32)
			if v.Kind != yaml.ScalarNode || err != nil || n == 0 {
				p.add(v.Line, kp, "must be a whole number from 1 to %d, got %q", uint32(1<<32-1), v.Value)
				n = 1
			}
			r.UnitMultiplier = uint32(n)
		case "unlimited":
			r.Unlimited = p.boolean(v, kp)
		case "name":
			r.Name = p.str(v, kp)
		case "replaces":
			replaces = v
		default:
			p.add(k.Line, kp, "unknown key (known: unit, requests_per_unit, unit_multiplier, unlimited, name, replaces)")
		}
	}
	switch {
	case r.Unlimited && unitNode != nil && r.Unit.Duration() > 0:
		p.add(unitNode.Line, path+".unit", "should not specify a unit when unlimited")
	case r.Unlimited:
	case unitNode == nil:
		p.add(m.Line, path+".unit", "a unit is required (second, minute, hour, day, week, month, year)")
	case r.Unit.Duration() == 0:
		p.add(unitNode.Line, path+".unit", "invalid unit %q (second, minute, hour, day, week, month, year)", unitNode.Value)
	case time.Duration(r.UnitMultiplier) > maxPeriod/r.Unit.Duration():
		p.add(m.Line, path+".unit_multiplier", "a period of %d %ss is longer than %v", r.UnitMultiplier, r.Unit, maxPeriod)
	}
	if replaces != nil {
		if replaces.Kind != yaml.SequenceNode {
			p.add(replaces.Line, path+".replaces", "must be a list of {name: ...}, got %s", kindName(replaces))
		} else {
			for i, e := range replaces.Content {
				ep := path + ".replaces[" + strconv.Itoa(i) + "]"
				name := ""
				if e.Kind == yaml.MappingNode {
					for j := 0; j+1 < len(e.Content); j += 2 {
						if e.Content[j].Value == "name" {
							name = p.str(e.Content[j+1], ep+".name")
						} else {
							p.add(e.Content[j].Line, ep+"."+e.Content[j].Value, "unknown key (known: name)")
						}
					}
				} else {
					p.add(e.Line, ep, "must be a mapping {name: ...}, got %s", kindName(e))
					continue
				}
				switch {
				case name == "":
					p.add(e.Line, ep+".name", "an empty replaces entry")
				case name == r.Name:
					p.add(e.Line, ep+".name", "a rule cannot replace itself (%q)", name)
				default:
					r.Replaces = append(r.Replaces, name)
				}
			}
		}
	}
	return r
}

// metadata decodes a descriptor's metadata: a mapping of string keys to
// strings, numbers, booleans, lists and mappings (what a protobuf Struct
// holds).
func (p *yamlParser) metadata(v *yaml.Node, path string) map[string]any {
	if v.Kind != yaml.MappingNode {
		p.add(v.Line, path, "must be a mapping, got %s", kindName(v))
		return nil
	}
	m, ok := p.metaValue(v, path, 0).(map[string]any)
	if !ok {
		return nil
	}
	return m
}

func (p *yamlParser) metaValue(v *yaml.Node, path string, depth int) any {
	if depth > maxDepth {
		p.add(v.Line, path, "nested deeper than %d levels", maxDepth)
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(v.Content)/2)
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := v.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
				p.add(k.Line, path, "a key must be a string, got %s", kindName(k))
				continue
			}
			m[k.Value] = p.metaValue(v.Content[i+1], path+"."+k.Value, depth+1)
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, len(v.Content))
		for i, e := range v.Content {
			l[i] = p.metaValue(e, path+"["+strconv.Itoa(i)+"]", depth+1)
		}
		return l
	case yaml.ScalarNode:
		switch v.Tag {
		case "!!null":
			return nil
		case "!!bool":
			return p.boolean(v, path)
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64)
			if err != nil {
				var i int64
				i, err = strconv.ParseInt(strings.ReplaceAll(v.Value, "_", ""), 0, 64)
				f = float64(i)
			}
			if err != nil {
				p.add(v.Line, path, "not a number this service reads: %q", v.Value)
				return nil
			}
			return f
		}
		return v.Value
	}
	p.add(v.Line, path, "must be a string, number, boolean, list or mapping, got %s", kindName(v))
	return nil
}

func (p *yamlParser) str(v *yaml.Node, path string) string {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		p.add(v.Line, path, "must be a string, got %s", kindName(v))
		return ""
	}
	return v.Value
}

func (p *yamlParser) boolean(v *yaml.Node, path string) bool {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!bool" {
		b, err := strconv.ParseBool(strings.ToLower(v.Value))
		if err == nil {
			return b
		}
	}
	p.add(v.Line, path, "must be true or false, got %q", v.Value)
	return false
}

// lp length-prefixes s ("5:hello"), so that joined values stay apart.
func lp(s string) string { return strconv.Itoa(len(s)) + ":" + s }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

func yamlErrorText(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "yaml: ")
	return s
}

// gatewayLimit is one rate limit of a gateway JSON file.
type gatewayLimit struct {
	rl      stack.RateLimit
	m       *match.Matcher
	file    string
	entries [][]string
}

func (c *Config) parseGateway(errs *match.ConfigError, name string, data []byte) {
	cfg, err := stack.Parse(data)
	if err != nil {
		var ce *match.ConfigError
		if errors.As(err, &ce) {
			for _, pr := range ce.Problems {
				errs.Add(name+": "+pr.Path, "%s", pr.Message)
			}
			return
		}
		errs.Add(name, "%v", err)
		return
	}
	all := append(slices.Clone(cfg.RateLimits), cfg.ServiceLimits...)
	for i, rl := range all {
		for j, e := range rl.Entries {
			if len(e.Connections) > 0 {
				errs.Add(name+": "+"rateLimits["+strconv.Itoa(i)+"].entries["+strconv.Itoa(j)+"].connections",
					"connections limits have no meaning in Envoy's protocol (a request does not end there); use requests or tokens")
			}
		}
		tuples := make([][]string, len(rl.Entries))
		for j, e := range rl.Entries {
			t := make([]string, len(rl.DimensionKeys))
			for k, key := range rl.DimensionKeys {
				t[k] = e.Dimensions[key]
			}
			tuples[j] = t
		}
		m, err := match.New(rl.DimensionKeys, tuples)
		if err != nil {
			errs.Add(name+": rateLimits["+strconv.Itoa(i)+"]", "%v", err)
			continue
		}
		c.gateway = append(c.gateway, gatewayLimit{rl: rl, m: m, file: name, entries: tuples})
	}
}
