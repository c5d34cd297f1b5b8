package bucket_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bucket"
)

func TestNoAllocations(t *testing.T) {
	if raceEnabled || testing.CoverMode() != "" {
		t.Skip("allocation counts are not meaningful under -race or -cover")
	}
	b := bucket.New(1e6, 100)
	tab := bucket.NewTable(1e6, 100)
	tab.TakeN(t0, "existing", 1)
	key := []byte("existing")
	now := t0
	for name, f := range map[string]func(){
		"Allow":  func() { b.Allow() },
		"AllowN": func() { now = now.Add(time.Microsecond); b.AllowN(now, 1) },
		"TakeN":  func() { b.TakeN(now, 1) },
		"TakeN+GiveBack": func() {
			if r := b.TakeN(now, 1); r.OK {
				_ = b.GiveBack(&r.Grant, 1)
			}
		},
		"TryTakeGrant+GiveBack": func() {
			var g bucket.Grant
			if ok, _ := b.TryTakeGrant(now, 1, &g); ok {
				_ = b.GiveBack(&g, 1)
			}
		},
		"ChargeN":         func() { b.ChargeN(now, 1) },
		"TokensAt":        func() { b.TokensAt(now) },
		"Table.TakeN":     func() { tab.TakeN(now, "existing", 1) },
		"Table.TakeBytes": func() { tab.TakeBytes(now, key, 1) },
		"Table.TryTakeGrantBytes+GiveBackBytes": func() {
			var g bucket.Grant
			if ok, _ := tab.TryTakeGrantBytes(now, key, 1, &g); ok {
				_ = tab.GiveBackBytes(key, &g, 1)
			}
		},
		"Table.ChargeBytes": func() { tab.ChargeBytes(now, key, 1) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocs per call, want 0", name, n)
		}
	}
}
