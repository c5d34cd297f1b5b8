package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// point is one (traffic, rejections per second) pair.
type point struct{ X, Y float64 }

// curve is one shard count's data: the model as a line, each simulated
// limiter as markers.
type curve struct {
	Shards int
	Model  []point
	Sims   [][]point // in the order of chart.SimNames
}

// chart is a plot of rejections per second against traffic.
type chart struct {
	Title    string
	SimNames []string // one marker shape each: circle, square, triangle
	Curves   []curve
}

// maxDecades is the most decades the y axis spans.
const maxDecades = 5

// palette holds one colour per curve (Okabe–Ito, safe for colour blindness).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"}

// writeSVG draws c as a standalone SVG document.
func writeSVG(w io.Writer, c chart) error {
	const (
		width, height          = 1000.0, 560.0
		left, right, top, bot  = 70.0, 330.0, 50.0, 60.0
		plotW, plotH           = width - left - right, height - top - bot
		markerR, legendLineLen = 3.5, 24.0
	)
	// x is linear; y is logarithmic, from a decade floor to a decade above
	// the largest value, since rejections span many orders of magnitude
	// between light traffic and overload. Values below the floor (zeros
	// included) are not drawn.
	var xmin, xmax, ymax, ypos = math.Inf(1), math.Inf(-1), 0.0, math.Inf(1)
	for _, cv := range c.Curves {
		for _, ps := range append([][]point{cv.Model}, cv.Sims...) {
			for _, p := range ps {
				xmin, xmax, ymax = math.Min(xmin, p.X), math.Max(xmax, p.X), math.Max(ymax, p.Y)
				if p.Y > 0 {
					ypos = math.Min(ypos, p.Y)
				}
			}
		}
	}
	if math.IsInf(xmin, 0) || xmin == xmax || ymax <= 0 {
		return fmt.Errorf("plot: need points at two or more traffic levels and some rejections")
	}
	dtop := math.Ceil(math.Log10(ymax))
	dlo := math.Max(math.Floor(math.Log10(ypos)), dtop-maxDecades)
	if dlo == dtop {
		dlo--
	}
	floor := math.Pow(10, dlo)
	xTicks := niceTicks(xmin, xmax)
	sx := func(x float64) float64 { return left + (x-xmin)/(xmax-xmin)*plotW }
	sy := func(y float64) float64 { return top + plotH - (math.Log10(y)-dlo)/(dtop-dlo)*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%g" height="%g" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%g" y="28" font-size="15" text-anchor="middle">%s</text>`+"\n", left+plotW/2, escape(c.Title))
	for d := dlo; d <= dtop; d++ {
		t := math.Pow(10, d)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, sy(t), left+plotW, sy(t))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, sy(t)+4, fmtTick(t))
	}
	for _, t := range xTicks {
		if t < xmin || t > xmax {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", sx(t), top, sx(t), top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", sx(t), top+plotH+18, fmtTick(t))
	}
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">traffic λ (requests/s over the fleet)</text>`+"\n", left+plotW/2, height-15)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">rejections/s (429s, retries included; log scale)</text>`+"\n", top+plotH/2)

	for i, cv := range c.Curves {
		col := palette[i%len(palette)]
		// The model line, broken where it dips below the floor.
		var pts []string
		flush := func() {
			if len(pts) > 1 {
				fmt.Fprintf(&b, `<polyline class="model" fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for _, p := range cv.Model {
			if p.Y < floor {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(p.X), sy(p.Y)))
		}
		flush()
		for k, ps := range cv.Sims {
			for _, p := range ps {
				if p.Y >= floor {
					marker(&b, k, sx(p.X), sy(p.Y), markerR, col)
				}
			}
		}
	}

	// Legend: one line per shard count, then one entry per marker shape.
	lx, ly := left+plotW+20, top+10
	for i, cv := range c.Curves {
		col := palette[i%len(palette)]
		y := ly + float64(i)*20
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", lx, y, lx+legendLineLen, y, col)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%d shard%s (model)</text>`+"\n", lx+legendLineLen+6, y+4, cv.Shards, plural(cv.Shards))
	}
	ly += float64(len(c.Curves))*20 + 12
	for k, name := range c.SimNames {
		y := ly + float64(k)*20
		marker(&b, k, lx+legendLineLen/2, y, markerR, "#333")
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+legendLineLen+6, y+4, escape(name))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555">values below %s/s (zeros too) are not drawn</text>`+"\n", lx, ly+float64(len(c.SimNames))*20+8, fmtTick(floor))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// marker draws shape k (0 circle, 1 square, 2 triangle, then repeating)
// centred on (x, y).
func marker(b *strings.Builder, k int, x, y, r float64, col string) {
	switch k % 3 {
	case 0:
		fmt.Fprintf(b, `<circle class="sim%d" cx="%.1f" cy="%.1f" r="%g" fill="none" stroke="%s"/>`+"\n", k, x, y, r, col)
	case 1:
		fmt.Fprintf(b, `<rect class="sim%d" x="%.1f" y="%.1f" width="%g" height="%g" fill="%s"/>`+"\n", k, x-r, y-r, 2*r, 2*r, col)
	default:
		fmt.Fprintf(b, `<path class="sim%d" d="M%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="none" stroke="%s"/>`+"\n", k, x, y-r-1, x+r+1, y+r, x-r-1, y+r, col)
	}
}

// niceTicks returns about five round tick values covering [lo, hi].
func niceTicks(lo, hi float64) []float64 {
	if hi <= lo {
		return []float64{lo}
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ts []float64
	for t := math.Floor(lo/step) * step; t <= hi+step*0.999; t += step {
		ts = append(ts, t)
	}
	return ts
}

func fmtTick(v float64) string {
	if math.Abs(v) < 1e-12 {
		return "0"
	}
	if math.Abs(v) < 1e-3 {
		return fmt.Sprintf("%g", v)
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func escape(s string) string { return escaper.Replace(s) }
