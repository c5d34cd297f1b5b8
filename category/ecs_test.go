package category_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/category"
)

// readSeedTable parses testdata/ecs_table.md, the seed's ECS table copied
// verbatim from the reference: "| category | actions | burst | refill/s |".
func readSeedTable(t *testing.T) []category.Category {
	t.Helper()
	f, err := os.Open("testdata/ecs_table.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []category.Category
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		row := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(row, "|") || strings.HasPrefix(row, "|---") || strings.HasPrefix(row, "| category ") {
			continue
		}
		cells := strings.Split(strings.Trim(row, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("ecs_table.md:%d: %d cells, want 4", line, len(cells))
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		burst, err := strconv.Atoi(cells[2])
		if err != nil {
			t.Fatalf("ecs_table.md:%d: burst: %v", line, err)
		}
		refill, err := strconv.ParseFloat(cells[3], 64)
		if err != nil {
			t.Fatalf("ecs_table.md:%d: refill: %v", line, err)
		}
		actions := strings.Split(cells[1], ",")
		for i := range actions {
			actions[i] = strings.TrimSpace(actions[i])
		}
		out = append(out, category.Category{Name: cells[0], Burst: burst, Refill: refill, Actions: actions})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestECSMatchesTheSeedTable(t *testing.T) {
	seed := readSeedTable(t)
	if len(seed) != 20 {
		t.Fatalf("the seed table has %d categories, want 20 (parse error?)", len(seed))
	}
	if diff := cmp.Diff(seed, category.ECS()); diff != "" {
		t.Errorf("category.ECS() differs from the seed's table (-seed +ECS):\n%s", diff)
	}
}

func TestECSBuildsAndAnswersEveryAction(t *testing.T) {
	set, err := category.New(category.ECS())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range readSeedTable(t) {
		for _, a := range c.Actions {
			got, ok := set.Category(a)
			if !ok || got.Name != c.Name || got.Burst != c.Burst || got.Refill != c.Refill {
				t.Errorf("%s: category %+v (found %v), want %s %d/%v", a, got, ok, c.Name, c.Burst, c.Refill)
			}
		}
		// The bucket really has the seed's burst: exactly Burst calls of the
		// category's first action pass in one instant.
		if n := count(t, set, t0, c.Actions[0], c.Burst+5); n != c.Burst {
			t.Errorf("%s: %d of %d calls allowed at once, want the burst %d", c.Name, n, c.Burst+5, c.Burst)
		}
		// And its refill: one second later, Refill more.
		if n := count(t, set, t0.Add(time.Second), c.Actions[len(c.Actions)-1], c.Burst); n != int(c.Refill) {
			t.Errorf("%s: %d calls allowed a second after draining, want the refill %v", c.Name, n, c.Refill)
		}
	}
}

// The seed's worked example, on the shipped table: Cluster read holds 50,
// refills 20 per second and is full again 2.5 s after being emptied.
func TestECSSeedWorkedExample(t *testing.T) {
	set, err := category.New(category.ECS())
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, set, t0, "DescribeClusters", 50); n != 50 {
		t.Fatalf("50 DescribeClusters in one second: %d allowed", n)
	}
	if n := count(t, set, t0, "ListClusters", 1); n != 0 {
		t.Fatalf("ListClusters after 50 DescribeClusters: allowed, want it to share the empty bucket")
	}
	if n := count(t, set, t0.Add(2499*time.Millisecond), "ListClusters", 50); n == 50 {
		t.Error("full before 2.5 s")
	}
	set, _ = category.New(category.ECS())
	count(t, set, t0, "DescribeClusters", 50)
	if n := count(t, set, t0.Add(2500*time.Millisecond), "ListClusters", 60); n != 50 {
		t.Errorf("2.5 s after emptying: %d allowed, want the full 50", n)
	}
}

func TestECSReturnsACopy(t *testing.T) {
	a := category.ECS()
	a[0].Burst = 1
	a[1].Actions[0] = "Changed"
	b := category.ECS()
	if b[0].Burst != 20 || b[1].Actions[0] != "DescribeClusters" {
		t.Errorf("changing one ECS() result changed the next: %+v %+v", b[0], b[1])
	}
}
