package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/examples/shardmodel/model"
)

func TestRunSeedDefaults(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "plot.svg")
	var out bytes.Buffer
	if err := run([]string{"-seconds", "400", "-plot", svg}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"λ = 132.645 requests/s, limit 150 over 6 shards, 1 retry",
		"border 26, P(X ≥ 26) = 0.22998",
		"predicted 429s: 6.8531/s",
		"smallest limit keeping 429s ≤ 1% over 6 shards: 180",
		"keep 429s ≤ 1%: 1 to 1",
		"400 simulated seconds",
		"plot written to " + svg,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// One table row per shard count 1, 2, 3, 6, with the model's column
	// equal to Predict's figure.
	for _, n := range []int{1, 2, 3, 6} {
		pr, _ := model.Predict(model.Scenario{Rate: 129.01 + 7.27/2, Limit: 150, Shards: n, Retries: 1})
		row := strings.Fields(findRow(t, got, n))
		if want := fmt.Sprintf("%.4f", pr.Rejected); len(row) != 6 || row[2] != want {
			t.Errorf("row for %d shards = %q, want 6 columns and model %s", n, row, want)
		}
		// The two token buckets agree with each other, not with the window.
		if row[4] != row[5] {
			t.Errorf("row for %d shards: sluice bucket %s, x/time/rate %s", n, row[4], row[5])
		}
	}
	checkSVG(t, svg)
}

// findRow returns the table line whose first column is n.
func findRow(t *testing.T, out string, n int) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == strconv.Itoa(n) {
			return line
		}
	}
	t.Fatalf("no table row for %d shards in:\n%s", n, out)
	return ""
}

// checkSVG parses the plot as XML and counts what it must hold: a model line
// per shard count 1..6 and markers from both simulated limiters.
func checkSVG(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	counts := map[string]int{}
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			for _, a := range el.Attr {
				if a.Name.Local == "class" {
					counts[a.Value]++
				}
			}
		case xml.CharData:
			texts = append(texts, string(el))
		}
	}
	if counts["model"] < 6 {
		t.Errorf("plot has %d model lines, want at least one per shard count 1..6", counts["model"])
	}
	// 13 traffic levels × 6 shard counts, less those below the floor.
	if counts["sim0"] < 30 || counts["sim1"] < 10 || counts["sim2"] != counts["sim1"] {
		t.Errorf("plot markers: %d fixed-window, %d sluice bucket, %d x/time/rate; want many of each, the buckets alike", counts["sim0"], counts["sim1"], counts["sim2"])
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"1 shard (model)", "6 shards (model)", "fixed 1 s window (simulated)", "sluice bucket (simulated)", "traffic λ"} {
		if !strings.Contains(all, want) {
			t.Errorf("plot lacks the text %q", want)
		}
	}
}

func TestRunWithoutPlot(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run([]string{"-rate", "900", "-limit", "1000", "-shards", "4", "-retries", "0", "-target", "0.5", "-seconds", "50", "-plot", ""}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "plot written") {
		t.Error("-plot \"\" still wrote a plot")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files appeared: %v", entries)
	}
	if findRow(t, out.String(), 4) == "" {
		t.Error("the requested shard count 4 has no row")
	}
}

// Above the simulation budget the command still answers from the model and
// says what it skipped.
func TestRunHugeTraffic(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "big.svg")
	var out bytes.Buffer
	if err := run([]string{"-rate", "3e6", "-limit", "3000000", "-plot", svg}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"no simulation", "plot: model only", "(or more: the search stops there)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if row := strings.Fields(findRow(t, out.String(), 6)); len(row) != 6 || row[3] != "-" || row[4] != "-" || row[5] != "-" {
		t.Errorf("row for 6 shards = %q, want the simulated columns as -", row)
	}
	checkSVGModelOnly(t, svg)
}

func checkSVGModelOnly(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(data), `class="model"`); got < 6 {
		t.Errorf("model-only plot has %d model lines, want at least 6", got)
	}
	if strings.Contains(string(data), `class="sim`) {
		t.Error("model-only plot has simulation markers")
	}
}

func TestParseArgsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rate", "-3"}, "-rate -3"},
		{[]string{"-rate", "NaN"}, "-rate NaN"},
		{[]string{"-rate", "1e12"}, "-rate"},
		{[]string{"-limit", "-1"}, "-limit -1"},
		{[]string{"-shards", "0"}, "-shards 0"},
		{[]string{"-retries", "-1"}, "-retries -1"},
		{[]string{"-target", "0"}, "-target 0"},
		{[]string{"-seconds", "-5"}, "-seconds -5"},
		{[]string{"-shards", "x"}, "invalid value \"x\" for flag -shards"},
		{[]string{"extra"}, "unexpected argument \"extra\""},
	} {
		_, err := parseArgs(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseArgs(%q): err = %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseArgs([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: err = %v, want flag.ErrHelp", err)
	}
	if err := run([]string{"-plot", filepath.Join(t.TempDir(), "missing", "x.svg"), "-seconds", "10"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "-plot") {
		t.Errorf("unwritable plot path: err = %v, want one naming -plot", err)
	}
}

func TestWriteSVGNeedsData(t *testing.T) {
	one := chart{Curves: []curve{{Shards: 1, Model: []point{{100, 1}}}}}
	if err := writeSVG(io.Discard, one); err == nil {
		t.Error("a single traffic level: no error")
	}
	flat := chart{Curves: []curve{{Shards: 1, Model: []point{{100, 0}, {200, 0}}}}}
	if err := writeSVG(io.Discard, flat); err == nil {
		t.Error("no rejections anywhere: no error")
	}
}

func TestAutoSeconds(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want int
	}{{0, 1}, {1, 3600}, {132.645, 3600}, {1000, 2000}, {1e6, 2}, {2e6, 1}, {2.1e6, 0}} {
		if got := autoSeconds(tc.rate); got != tc.want {
			t.Errorf("autoSeconds(%v) = %d, want %d", tc.rate, got, tc.want)
		}
	}
}

// FuzzParseArgs feeds arbitrary flag values; parseArgs must not panic, and
// whatever it accepts the model must accept too.
func FuzzParseArgs(f *testing.F) {
	f.Add("-rate", "132.645", "-shards", "6")
	f.Add("-limit", "-1", "-target", "NaN")
	f.Add("-seconds", "99999999", "-retries", "1000")
	f.Add("--rate=1e9", "", "-shards", "1048576")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		cfg, err := parseArgs([]string{a, b, c, d}, io.Discard)
		if err != nil {
			return
		}
		if _, err := model.Predict(cfg.scenario); err != nil {
			t.Fatalf("parseArgs accepted %q but Predict refused: %v", []string{a, b, c, d}, err)
		}
		if cfg.target <= 0 || cfg.seconds < 0 {
			t.Fatalf("parseArgs accepted %q: %+v", []string{a, b, c, d}, cfg)
		}
	})
}
