package sluice_test

import (
	"bytes"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// exampleMarker precedes every ```go block of README.md and names the Example
// function the block is the body of:
//
//	*stack/readme_example_test.go, Example_quickStart:*
//
// (a line a reader sees: where to find the snippet whole).
var exampleMarker = regexp.MustCompile(`^\*(\S+), (Example\w*):\*$`)

type readmeBlock struct {
	line           int    // of the opening fence
	file, function string // from the marker; "" when there is none
	text           string
}

// readmeGoBlocks returns the ```go blocks of README.md with their markers.
func readmeGoBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var blocks []readmeBlock
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		b := readmeBlock{line: i + 1}
		for j := i - 1; j >= 0; j-- { // the marker: the last non-blank line before the fence
			if s := strings.TrimSpace(lines[j]); s != "" {
				if m := exampleMarker.FindStringSubmatch(s); m != nil {
					b.file, b.function = m[1], m[2]
				}
				break
			}
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		b.text = strings.Join(body, "\n")
		blocks = append(blocks, b)
	}
	return blocks
}

// exampleSource returns the body of function fn in file (without its braces,
// dedented by one tab) and the file's imports as `name "path"` or `"path"`.
func exampleSource(t *testing.T, file, fn string) (body string, imports map[string]bool) {
	t.Helper()
	src, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		t.Fatal(err)
	}
	if formatted, err := format.Source(src); err != nil || !bytes.Equal(formatted, src) {
		t.Errorf("%s is not gofmt-formatted (err %v): format it, then copy the example into README.md", file, err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	imports = map[string]bool{}
	for _, im := range f.Imports {
		imports[importSpec(im)] = true
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn || fd.Recv != nil {
			continue
		}
		inner := src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset]
		var out []string
		for _, l := range strings.Split(strings.Trim(string(inner), "\n"), "\n") {
			out = append(out, strings.TrimPrefix(l, "\t"))
		}
		return strings.Join(out, "\n"), imports
	}
	t.Fatalf("%s has no function %s", file, fn)
	return "", nil
}

func importSpec(im *ast.ImportSpec) string {
	p, _ := strconv.Unquote(im.Path.Value)
	if im.Name != nil {
		return im.Name.Name + " " + strconv.Quote(p)
	}
	return strconv.Quote(p)
}

// splitImports separates a leading import declaration from a README block.
func splitImports(t *testing.T, block string) (imports []string, rest string) {
	t.Helper()
	trimmed := strings.TrimLeft(block, "\n")
	if !strings.HasPrefix(trimmed, "import") {
		return nil, block
	}
	end := strings.Index(trimmed, "\n)\n")
	if !strings.HasPrefix(trimmed, "import (") {
		end = strings.Index(trimmed, "\n") - 2
	}
	if end < 0 {
		t.Fatalf("unterminated import block:\n%s", block)
	}
	decl := trimmed[:end+2]
	f, err := parser.ParseFile(token.NewFileSet(), "readme.go", "package p\n"+decl, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("the import block does not parse: %v\n%s", err, decl)
	}
	for _, im := range f.Imports {
		imports = append(imports, importSpec(im))
	}
	return imports, trimmed[end+2:]
}

// Every Go snippet of the README is the body of an Example function, verbatim
// (its import block listing only imports of the example's file), so that the
// snippets compile, check their errors and, where deterministic, print what
// their // Output: says. Edit the Example, then paste its body in the README.
func TestReadmeSnippetsAreExamples(t *testing.T) {
	blocks := readmeGoBlocks(t)
	if len(blocks) < 4 {
		t.Fatalf("found %d Go blocks in README.md: the parser is broken", len(blocks))
	}
	for _, b := range blocks {
		if b.function == "" {
			t.Errorf("README.md:%d: a Go block without a *file, Example_x:* line above it (nothing would compile it)", b.line)
			continue
		}
		body, fileImports := exampleSource(t, b.file, b.function)
		imports, rest := splitImports(t, b.text)
		for _, im := range imports {
			if !fileImports[im] {
				t.Errorf("README.md:%d: imports %s, which %s does not", b.line, im, b.file)
			}
		}
		if got, want := strings.Trim(rest, "\n"), body; got != want {
			t.Errorf("README.md:%d differs from the body of %s in %s:\n%s", b.line, b.function, b.file, lineDiff(want, got))
		}
	}
}

// lineDiff shows the first differing line of want (the Example) and got (the
// README).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			var b bytes.Buffer
			b.WriteString("line " + strconv.Itoa(i+1) + " of the snippet\n")
			b.WriteString("  example: " + strconv.Quote(wl) + "\n")
			b.WriteString("  README:  " + strconv.Quote(gl) + "\n")
			return b.String()
		}
	}
	return "(equal)"
}
