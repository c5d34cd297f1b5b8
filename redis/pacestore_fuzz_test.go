package redis

import (
	"strconv"
	"testing"
	"time"
)

// FuzzParseLearned: whatever a record's fields hold (a foreign or broken
// writer), reading them never panics, and what is kept is positive and
// within bounds; a record written by Merge reads back exactly.
func FuzzParseLearned(f *testing.F) {
	f.Add("100", "60000000", "1893499200000000", "1893499203000000", false)
	f.Add("-1", "0", "yesterday", "99999999999999999999999", true)
	f.Add("9007199254740993", "1e9", " 5", "", false)
	f.Fuzz(func(t *testing.T, l, w, a, p string, nilQuota bool) {
		vals := []any{l, w, a, p}
		if nilQuota {
			vals[0] = nil
		}
		got := parseLearned(vals)
		if got.Limit != 0 {
			if got.Limit < 0 || got.Limit > maxMicros || got.Window <= 0 || got.At.IsZero() {
				t.Fatalf("kept a bad quota %+v from %q", got, vals)
			}
			if n, _ := strconv.ParseInt(l, 10, 64); n != got.Limit || nilQuota {
				t.Fatalf("limit %d from %q", got.Limit, l)
			}
		} else if got.Window != 0 || !got.At.IsZero() {
			t.Fatalf("half a quota %+v from %q", got, vals)
		}
		if !got.PausedUntil.IsZero() && got.PausedUntil.Before(time.Unix(0, 0)) {
			t.Fatalf("pause before 1970 from %q", p)
		}
	})
}

func TestParseLearnedRoundTrip(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 123000, time.UTC)
	got := parseLearned([]any{"100", "60000000", strconv.FormatInt(at.UnixMicro(), 10), strconv.FormatInt(at.Add(time.Second).UnixMicro(), 10)})
	if got.Limit != 100 || got.Window != time.Minute || !got.At.Equal(at) || !got.PausedUntil.Equal(at.Add(time.Second)) {
		t.Fatalf("read back %+v", got)
	}
	if got := parseLearned([]any{"1"}); got.Limit != 0 {
		t.Fatalf("short reply read as %+v", got)
	}
}
