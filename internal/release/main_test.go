package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBreakingAllowed(t *testing.T) {
	for _, c := range []struct {
		latest, next string
		want         bool
	}{
		{"v0.1.0", "v0.1.1", false},
		{"v0.1.0", "v0.1.1-rc.1", false},
		{"v0.1.0", "v0.2.0", true},
		{"v0.1.0", "v0.2.0-rc.1", true},
		{"v0.1.0", "v1.0.0", true},
		{"v0.1.0", "v0.1.0", false},
		{"v0.2.0", "v0.1.5", false},
		{"v1.2.0", "v1.3.0", false},
		{"v1.2.0", "v2.0.0", true},
	} {
		if got, why := breakingAllowed(c.latest, c.next); got != c.want {
			t.Errorf("breakingAllowed(%s, %s) = %v (%s), want %v", c.latest, c.next, got, why, c.want)
		}
	}
}

func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v0.1.0": true, "v0.1.0-rc.ci.1.2": true, "v1.0.0": true,
		"v0.1": false, "0.1.0": false, "v0.1.0+meta": false, "v2.0.0": false, "": false,
	} {
		if err := checkVersion(v); (err == nil) != ok {
			t.Errorf("checkVersion(%q) = %v, want ok %v", v, err, ok)
		}
	}
}

func TestLatest(t *testing.T) {
	var out strings.Builder
	in := "v0.1.0-rc.1\nv0.1.0\ngrpclimit/v0.3.0\nv0.10.0\nv0.9.0\njunk\n"
	if err := cmdLatest(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "v0.10.0\n" {
		t.Errorf("latest = %q, want v0.10.0", out.String())
	}
}

func TestPatchSuccessor(t *testing.T) {
	for v, want := range map[string]string{"v0.1.0": "v0.1.1", "v0.1.9": "v0.1.10", "v0.2.0-rc.1": "v0.2.0", "v1.0.0": "v1.0.1"} {
		if got := patchSuccessor(v); got != want {
			t.Errorf("patchSuccessor(%s) = %s, want %s", v, got, want)
		}
	}
}

func TestChangelog(t *testing.T) {
	name := filepath.Join(t.TempDir(), "CHANGELOG.md")
	in := "# Changelog\n\nintro\n\n## [Unreleased]\n\nNext version: v0.1.0\n\n### Added\n\n- things\n\n## [0.0.9] - 2026-01-01\n\n- old\n"
	if err := os.WriteFile(name, []byte(in), 0o666); err != nil {
		t.Fatal(err)
	}
	if v, err := nextVersion(name); err != nil || v != "v0.1.0" {
		t.Fatalf("nextVersion = %q, %v", v, err)
	}
	if err := cmdChangelog([]string{"v0.1.0", "2026-12-02", name}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(name)
	want := "# Changelog\n\nintro\n\n## [Unreleased]\n\nNext version: v0.1.1\n\n## [0.1.0] - 2026-12-02\n\n### Added\n\n- things\n\n## [0.0.9] - 2026-01-01\n\n- old\n"
	if string(got) != want {
		t.Errorf("rotated changelog:\n%s\nwant:\n%s", got, want)
	}
	if v, err := nextVersion(name); err != nil || v != "v0.1.1" {
		t.Errorf("nextVersion after the release = %q, %v", v, err)
	}
}

func TestModuleZipFilesCarryTheLicense(t *testing.T) {
	paths := func(t *testing.T, files []string, prefix string) []string {
		t.Helper()
		zf, err := moduleZipFiles(files, prefix, []byte("module x\n"))
		if err != nil {
			t.Fatalf("moduleZipFiles(%q): %v", prefix, err)
		}
		var got []string
		for _, f := range zf {
			got = append(got, f.Path())
		}
		return got
	}
	tree := []string{"LICENSE", "go.mod", "doc.go", "grpclimit/go.mod", "grpclimit/grpc.go", "own/LICENSE", "own/go.mod"}
	if got, want := strings.Join(paths(t, tree, ""), " "), "LICENSE go.mod doc.go grpclimit/go.mod grpclimit/grpc.go own/LICENSE own/go.mod"; got != want {
		t.Errorf("root module's files = %s, want %s", got, want)
	}
	if got, want := strings.Join(paths(t, tree, "grpclimit/"), " "), "go.mod grpc.go LICENSE"; got != want {
		t.Errorf("a nested module without a license = %s, want %s (the root's LICENSE added)", got, want)
	}
	if got, want := strings.Join(paths(t, tree, "own/"), " "), "LICENSE go.mod"; got != want {
		t.Errorf("a nested module with its own license = %s, want %s (its own, once)", got, want)
	}
	if _, err := moduleZipFiles([]string{"go.mod", "sub/go.mod"}, "sub/", nil); err == nil || !strings.Contains(err.Error(), "LICENSE") {
		t.Errorf("a tree without a license: err = %v, want one naming LICENSE", err)
	}
}

// A command's go.mod loses its replaces of this repository's modules (go
// install PKG@VERSION refuses any replace); a library's keeps them.
func TestRewriteGoModDropsACommandsReplaces(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/lib\n\ngo 1.26.0\n")
	write("cmd/x/go.mod", "module example.com/lib/cmd/x\n\ngo 1.26.0\n\nrequire example.com/lib v0.1.0\n\nreplace example.com/lib => ../../\n")
	write("cmd/x/main.go", "// Command x.\npackage main\n\nfunc main() {}\n")
	write("use/go.mod", "module example.com/lib/use\n\ngo 1.26.0\n\nrequire example.com/lib v0.1.0\n\nreplace example.com/lib => ../\n")
	write("use/use.go", "package use\n")
	mods := []repoModule{{Tagged: true, Dir: ".", Path: "example.com/lib"}, {Tagged: true, Dir: "cmd/x", Path: "example.com/lib/cmd/x"}, {Tagged: true, Dir: "use", Path: "example.com/lib/use"}}
	out, _, err := rewriteGoMod(mods[1], mods, "v0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); strings.Contains(s, "replace") || !strings.Contains(s, "example.com/lib v0.2.0") {
		t.Errorf("command's go.mod:\n%s", s)
	}
	out, _, err = rewriteGoMod(mods[2], mods, "v0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); !strings.Contains(s, "replace example.com/lib => ../") || !strings.Contains(s, "example.com/lib v0.2.0") {
		t.Errorf("library's go.mod:\n%s", s)
	}
}

func TestDevReplacePutsTheReplacesBack(t *testing.T) {
	orig := "module example.com/lib/cmd/x\n\ngo 1.26.0\n\nrequire (\n\texample.com/lib v0.1.0\n\texample.com/other v1.0.0\n)\n\n// Why: the tree.\n// Second line.\nreplace example.com/lib => ../../\n\nreplace example.com/lib/use => ../../use\n"
	released := "module example.com/lib/cmd/x\n\ngo 1.26.0\n\nrequire (\n\texample.com/lib v0.2.0\n\texample.com/other v1.1.0\n)\n"
	out, err := devReplace("go.mod", []byte(released), []byte(orig))
	if err != nil {
		t.Fatal(err)
	}
	want := "module example.com/lib/cmd/x\n\ngo 1.26.0\n\nrequire (\n\texample.com/lib v0.2.0\n\texample.com/other v1.1.0\n)\n\n// Why: the tree.\n// Second line.\nreplace example.com/lib => ../../\n\nreplace example.com/lib/use => ../../use\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	if _, err := devReplace("go.mod", []byte(orig), []byte(orig)); err == nil {
		t.Error("a go.mod with replaces of its own: no error")
	}
	out, err = devReplace("go.mod", []byte(released), []byte(released))
	if err != nil || string(out) != released {
		t.Errorf("an original without replaces: %q, %v", out, err)
	}
}

func TestDevReplaceOfABlock(t *testing.T) {
	orig := "module m\n\ngo 1.26.0\n\nrequire example.com/lib v0.1.0\n\n// Why.\nreplace (\n\texample.com/lib => ../\n\texample.com/b => ../b\n)\n"
	out, err := devReplace("go.mod", []byte("module m\n\ngo 1.26.0\n\nrequire example.com/lib v0.2.0\n"), []byte(orig))
	if err != nil {
		t.Fatal(err)
	}
	want := "module m\n\ngo 1.26.0\n\nrequire example.com/lib v0.2.0\n\n// Why.\nreplace (\n\texample.com/lib => ../\n\texample.com/b => ../b\n)\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}
