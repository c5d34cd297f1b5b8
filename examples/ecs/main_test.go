package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/category"
)

func TestTableIsComplete(t *testing.T) {
	// The example runs on the table the category package ships: every
	// category of the reference with its actions, none listed twice
	// (category.New rejects that). category's own tests compare it, number
	// by number, to the seed.
	table := category.ECS()
	if len(table) != 20 {
		t.Errorf("%d categories, want 20", len(table))
	}
	if _, err := category.New(table); err != nil {
		t.Fatal(err)
	}
	actions := 0
	for _, c := range table {
		actions += len(c.Actions)
	}
	if actions != 53 {
		t.Errorf("%d actions, want 53", actions)
	}
}

func TestDemo(t *testing.T) {
	var b strings.Builder
	if err := run(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"t=0s     DescribeClusters 25/25  ListClusters 25/25",
		"t=5s     DescribeClusters 50/50  ListClusters 0/50 (ThrottlingException: Rate exceeded, retry after 50ms)",
		"t=6s     DescribeClusters 20/30",
		"t=8s     DescribeClusters 20/30",
		"ListClusters 50/60",
		"RunTask 100/120", "StopTask 0/10", "DeleteTaskDefinitions 5/8", "CreateService 50/60",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
