package match_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/racecheck"
	"github.com/sluicehq/sluice/match"
)

func TestSeedTable(t *testing.T) {
	// The gateway's own example: dimensionKeys [targetName, toolName],
	// resolved values [my-target, readData].
	keys := []string{"targetName", "toolName"}
	entries := [][]string{
		{"*", "*"},
		{"my-target", "*"},
		{"my-target", "readData"},
	}
	m, err := match.New(keys, entries)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		values []string
		want   int
		ok     bool
	}{
		{[]string{"my-target", "readData"}, 2, true},
		{[]string{"my-target", "writeData"}, 1, true},
		{[]string{"other", "readData"}, 0, true},
		{[]string{"", ""}, 0, true},
		{[]string{"my-target"}, 0, false}, // wrong arity never matches
	}
	for _, c := range cases {
		got, ok := m.Match(c.values)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("Match(%q) = %d, %v; want %d, %v", c.values, got, ok, c.want, c.ok)
		}
	}
}

func TestNoDefaultSkips(t *testing.T) {
	m, err := match.New([]string{"targetName", "toolName"}, [][]string{{"a", "b"}, {"a", "*"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Match([]string{"b", "b"}); ok {
		t.Fatal("no entry matches (b, b): the limit must be skipped")
	}
	if i, ok := m.Match([]string{"a", "zzz"}); !ok || i != 1 {
		t.Fatalf("Match(a, zzz) = %d, %v; want the (a, *) entry", i, ok)
	}
}

func TestEncodingHasNoCollisions(t *testing.T) {
	// "a,b"+"c" must not collide with "a"+"b,c", nor with a length-byte trick.
	m, err := match.New([]string{"k1", "k2", "k3"}, [][]string{
		{"a,b", "c", "x"},
		{"a", "b,c", "x"},
		{"a\x01", "b", "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for want, vals := range [][]string{{"a,b", "c", "x"}, {"a", "b,c", "x"}, {"a\x01", "b", "x"}} {
		if got, ok := m.Match(vals); !ok || got != want {
			t.Errorf("Match(%q) = %d, %v; want %d", vals, got, ok, want)
		}
	}
	if _, ok := m.Match([]string{"a", "\x01b", "x"}); ok {
		t.Error("crafted values matched an entry they do not equal")
	}
}

func TestValidationListsEveryProblem(t *testing.T) {
	keys := []string{"targetName", "toolName", "targetName", ""}
	entries := [][]string{
		{"*", "readData", "x", "y"}, // wildcard before exact
		{"a", "", "x", "y"},         // empty value
		{"a", "b"},                  // wrong arity
		{"a", "b", "x", "y"},        // fine
		{"a", "b", "x", "y"},        // duplicate
	}
	_, err := match.New(keys, entries)
	var ce *match.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New = %v; want a *ConfigError", err)
	}
	wantSubs := []string{
		`dimensionKeys[2]: duplicate dimension key "targetName"`,
		`dimensionKeys[3]: empty dimension key`,
		`entries[0].dimensions.toolName: exact value "readData" after a "*"`,
		`entries[1].dimensions.toolName: empty value`,
		`entries[2].dimensions: has 2 values for 4 dimension keys`,
		`entries[4]: duplicate entry a,b,x,y (same as entries[3])`,
	}
	msg := err.Error()
	for _, s := range wantSubs {
		if !strings.Contains(msg, s) {
			t.Errorf("error lacks %q:\n%s", s, msg)
		}
	}
	if len(ce.Problems) != len(wantSubs) {
		t.Errorf("got %d problems, want %d:\n%s", len(ce.Problems), len(wantSubs), msg)
	}
}

func TestSizeLimits(t *testing.T) {
	keys := make([]string, 11)
	for i := range keys {
		keys[i] = string(rune('a' + i))
	}
	if _, err := match.New(keys, [][]string{make([]string, 11)}); err == nil || !strings.Contains(err.Error(), "11 dimension keys, at most 10") {
		t.Errorf("11 keys: %v", err)
	}
	entries := make([][]string, 1001)
	for i := range entries {
		entries[i] = []string{strings.Repeat("x", i+1)}
	}
	if _, err := match.New([]string{"k"}, entries); err == nil || !strings.Contains(err.Error(), "1001 entries, at most 1000") {
		t.Errorf("1001 entries: %v", err)
	}
	if _, err := match.New(nil, nil); err == nil {
		t.Error("no keys and no entries must be rejected")
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	if racecheck.Enabled {
		t.Skip("allocation counts differ under -race")
	}
	entries := [][]string{{"*", "*", "*"}}
	for i := 0; i < 100; i++ {
		entries = append(entries, []string{"t" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), "tool", "*"})
	}
	m, err := match.New([]string{"targetName", "toolName", "caller"}, entries)
	if err != nil {
		t.Fatal(err)
	}
	vals := []string{"tb", "tool", "alice"}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := m.Match(vals); !ok {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Fatalf("Match allocates %.1f times per call; want 0", allocs)
	}
}

func FuzzNewAndMatch(f *testing.F) {
	f.Add("targetName,toolName", "my-target,readData;my-target,*;*,*", "my-target,readData")
	f.Add("a", "*;x", "x")
	f.Add("a,b,c", "*,x,*;,,", "1,2,3")
	f.Fuzz(func(t *testing.T, keysCSV, entriesSpec, valuesCSV string) {
		keys := strings.Split(keysCSV, ",")
		var entries [][]string
		for _, e := range strings.Split(entriesSpec, ";") {
			entries = append(entries, strings.Split(e, ","))
		}
		m, err := match.New(keys, entries)
		if err != nil {
			var ce *match.ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %v is not a non-empty *ConfigError", err)
			}
			return
		}
		values := strings.Split(valuesCSV, ",")
		i, ok := m.Match(values)
		if !ok {
			// No entry: then none applies (no all-wildcard, no prefix).
			for _, e := range entries {
				q := exactPrefix(e)
				if len(values) == len(keys) && slices.Equal(e[:q], values[:q]) {
					t.Fatalf("no match for %q, but entry %q applies", values, e)
				}
			}
			return
		}
		// The entry found must match the values and be the most specific one.
		e := entries[i]
		p := exactPrefix(e)
		for j := 0; j < p; j++ {
			if e[j] != values[j] {
				t.Fatalf("entry %q returned for values %q", e, values)
			}
		}
		for _, other := range entries {
			q := exactPrefix(other)
			if q <= p {
				continue
			}
			same := true
			for j := 0; j < q; j++ {
				if other[j] != values[j] {
					same = false
				}
			}
			if same {
				t.Fatalf("entry %q matched but %q is more specific for %q", e, other, values)
			}
		}
	})
}

// exactPrefix returns how many leading values of an entry are exact.
func exactPrefix(entry []string) int {
	for i, v := range entry {
		if v == match.Wildcard {
			return i
		}
	}
	return len(entry)
}
