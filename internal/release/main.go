// Command release is the Go half of sluice's release tooling: what the shell
// scripts need that is better done with golang.org/x/mod than with sed. Run it
// from the repository's root (go run ./internal/release ...); the scripts do.
//
//	release modules
//	    check that scripts/modules.txt names every go.mod of the repository;
//	    print "tag|untagged DIR MODULEPATH", one module a line
//	release setreq VERSION
//	    set every requirement of a module of this repository on another one to
//	    VERSION, in every go.mod (in place; replace directives are kept)
//	release proxy -version VERSION -out DIR
//	    write a file:// module proxy (list, .info, .mod, .zip) holding every
//	    tagged module at VERSION, made from the working tree's files (tracked
//	    or not ignored) with the go.mod files as setreq would leave them
//	release checkversion VERSION [LATEST]
//	    VERSION is a canonical semantic version sluice can release (and after
//	    LATEST, when given)
//	release latest
//	    read tag names on standard input, print the highest release (a
//	    version without a pre-release part) or nothing
//	release next [CHANGELOG.md]
//	    print the version named by the "Next version:" line of the changelog's
//	    Unreleased section
//	release allowed LATEST NEXT
//	    exit 0 when NEXT may make incompatible API changes against LATEST
//	    (v0: a minor bump; v1 and later: a major bump), 1 with the reason when not
//	release commands
//	    print the directory of every tagged command (a module whose root
//	    package is main), one a line: setreq drops their replaces of this
//	    repository's modules, so the release tidies them against a proxy
//	release devreplace DIR ORIGINAL
//	    after a release: put the replace directives of the go.mod file
//	    ORIGINAL (with their comments) back into DIR/go.mod, so that the
//	    command builds against the tree again
//	release changelog VERSION DATE [CHANGELOG.md]
//	    turn the Unreleased section into VERSION's, dated DATE, and open a new
//	    Unreleased section whose next version is VERSION's patch successor
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

const modulesFile = "scripts/modules.txt"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "modules":
		err = cmdModules()
	case "setreq":
		err = cmdSetreq(args)
	case "proxy":
		err = cmdProxy(args)
	case "checkversion":
		err = cmdCheckVersion(args)
	case "latest":
		err = cmdLatest(os.Stdin, os.Stdout)
	case "next":
		err = cmdNext(args)
	case "allowed":
		err = cmdAllowed(args)
	case "changelog":
		err = cmdChangelog(args)
	case "commands":
		err = cmdCommands()
	case "devreplace":
		err = cmdDevReplace(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release modules | commands | devreplace DIR ORIGINAL | setreq V | proxy -version V -out DIR | checkversion V [LATEST] | latest | next [FILE] | allowed LATEST NEXT | changelog V DATE [FILE]")
	os.Exit(2)
}

// A repoModule is one line of scripts/modules.txt, with its module path.
type repoModule struct {
	Tagged bool
	Dir    string // slash-separated, relative to the root; "." for the root
	Path   string // the module path its go.mod declares
}

// TagName is the git tag that releases the module at version v.
func (m repoModule) TagName(v string) string {
	if m.Dir == "." {
		return v
	}
	return m.Dir + "/" + v
}

// loadModules reads scripts/modules.txt and checks it against the go.mod
// files found in the tree (testdata and hidden directories aside).
func loadModules() ([]repoModule, error) {
	data, err := os.ReadFile(modulesFile)
	if err != nil {
		return nil, fmt.Errorf("%v (run from the repository's root)", err)
	}
	var mods []repoModule
	listed := map[string]bool{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != "tag" && f[0] != "untagged") || (f[0] == "untagged" && len(f) < 3) {
			return nil, fmt.Errorf("%s:%d: want \"tag DIR\" or \"untagged DIR WHY\"", modulesFile, i+1)
		}
		dir := path.Clean(f[1])
		if listed[dir] {
			return nil, fmt.Errorf("%s:%d: %s listed twice", modulesFile, i+1, dir)
		}
		listed[dir] = true
		gomod, err := os.ReadFile(filepath.Join(filepath.FromSlash(dir), "go.mod"))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", modulesFile, i+1, err)
		}
		p := modfile.ModulePath(gomod)
		if p == "" {
			return nil, fmt.Errorf("%s/go.mod: no module path", dir)
		}
		mods = append(mods, repoModule{Tagged: f[0] == "tag", Dir: dir, Path: p})
	}
	var missing []string
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			if dir := filepath.ToSlash(filepath.Dir(p)); !listed[dir] {
				missing = append(missing, dir)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s does not list the module(s) in %s: add each as tag or untagged", modulesFile, strings.Join(missing, ", "))
	}
	return mods, nil
}

func cmdModules() error {
	mods, err := loadModules()
	if err != nil {
		return err
	}
	for _, m := range mods {
		kind := "untagged"
		if m.Tagged {
			kind = "tag"
		}
		fmt.Println(kind, m.Dir, m.Path)
	}
	return nil
}

func cmdCommands() error {
	mods, err := loadModules()
	if err != nil {
		return err
	}
	for _, m := range mods {
		if m.Tagged && isCommand(m.Dir) {
			fmt.Println(m.Dir)
		}
	}
	return nil
}

func cmdDevReplace(args []string) error {
	if len(args) != 2 {
		usage()
	}
	name := filepath.Join(filepath.FromSlash(args[0]), "go.mod")
	cur, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	orig, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	out, err := devReplace(name, cur, orig)
	if err != nil {
		return err
	}
	return os.WriteFile(name, out, 0o666)
}

// devReplace returns the go.mod cur with the replace directives of orig put
// back: the text of orig from its first replace directive (and the comment
// above it) to its end, which is where this repository's go.mod files keep
// them. cur must hold no replace directive of its own.
func devReplace(name string, cur, orig []byte) ([]byte, error) {
	c, err := modfile.Parse(name, cur, nil)
	if err != nil {
		return nil, err
	}
	if len(c.Replace) > 0 {
		return nil, fmt.Errorf("%s: has replace directives already", name)
	}
	o, err := modfile.Parse(name+" (original)", orig, nil)
	if err != nil {
		return nil, err
	}
	if len(o.Replace) == 0 {
		return cur, nil
	}
	start := -1
	for _, stmt := range o.Syntax.Stmt {
		var tok []string
		switch x := stmt.(type) {
		case *modfile.Line:
			tok = x.Token
		case *modfile.LineBlock:
			tok = x.Token
		}
		if len(tok) == 0 || tok[0] != "replace" {
			continue
		}
		first, _ := stmt.Span()
		start = first.Byte
		if com := stmt.Comment().Before; len(com) > 0 {
			start = com[0].Start.Byte
		}
		break
	}
	if start < 0 {
		return nil, fmt.Errorf("%s (original): no replace statement found", name)
	}
	text := append(bytes.TrimRight(slices.Clone(cur), "\n"), "\n\n"...)
	text = append(text, orig[start:]...)
	f, err := modfile.Parse(name, text, nil)
	if err != nil {
		return nil, err
	}
	if len(f.Replace) != len(o.Replace) {
		return nil, fmt.Errorf("%s: %d replace directives after the merge, want %d", name, len(f.Replace), len(o.Replace))
	}
	f.Cleanup()
	return f.Format()
}

// rewriteGoMod returns the go.mod of m with every requirement on a module of
// the repository set to v, and whether that changed anything. A tagged module
// must not require an untagged one: no consumer could resolve it.
func rewriteGoMod(m repoModule, mods []repoModule, v string) (out []byte, changed bool, err error) {
	name := filepath.Join(filepath.FromSlash(m.Dir), "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, false, err
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, false, err
	}
	byPath := map[string]repoModule{}
	for _, o := range mods {
		byPath[o.Path] = o
	}
	for _, r := range f.Require {
		o, ok := byPath[r.Mod.Path]
		if !ok {
			continue
		}
		if m.Tagged && !o.Tagged {
			return nil, false, fmt.Errorf("%s: the tagged module %s requires the untagged %s", name, m.Path, o.Path)
		}
		if r.Mod.Version != v {
			if err := f.AddRequire(r.Mod.Path, v); err != nil {
				return nil, false, err
			}
			changed = true
		}
	}
	if m.Tagged && isCommand(m.Dir) {
		// go install PKG@VERSION refuses a module whose go.mod holds any
		// replace directive; a command's replaces of this repository's
		// modules (there for development, as in every module) go.
		for _, r := range f.Replace {
			if _, ours := byPath[r.Old.Path]; ours {
				if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
					return nil, false, err
				}
				changed = true
			}
		}
	}
	if !changed {
		return data, false, nil
	}
	f.Cleanup()
	out, err = f.Format()
	return out, true, err
}

// isCommand reports whether the module in dir is a command: a non-test Go
// file at its root declares package main.
func isCommand(dir string) bool {
	names, _ := filepath.Glob(filepath.Join(filepath.FromSlash(dir), "*.go"))
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		data, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "package ") {
				if strings.TrimSpace(strings.TrimPrefix(line, "package ")) == "main" {
					return true
				}
				break
			}
		}
	}
	return false
}

func cmdSetreq(args []string) error {
	if len(args) != 1 {
		usage()
	}
	v := args[0]
	if err := checkVersion(v); err != nil {
		return err
	}
	mods, err := loadModules()
	if err != nil {
		return err
	}
	for _, m := range mods {
		out, changed, err := rewriteGoMod(m, mods, v)
		if err != nil {
			return err
		}
		if !changed {
			continue
		}
		name := filepath.Join(filepath.FromSlash(m.Dir), "go.mod")
		if err := os.WriteFile(name, out, 0o666); err != nil {
			return err
		}
		fmt.Printf("%s: requirements on this repository's modules set to %s\n", name, v)
	}
	return nil
}

// treeFiles lists the files a commit of the working tree would hold: tracked
// files that still exist and untracked files git does not ignore.
func treeFiles() ([]string, error) {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files (the proxy is made from a git checkout): %v", err)
	}
	var files []string
	seen := map[string]bool{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		if _, err := os.Lstat(filepath.FromSlash(f)); errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		files = append(files, f)
	}
	slices.Sort(files)
	return files, nil
}

// zipFile is one file of a module zip: a file of the tree, or (for go.mod)
// the rewritten contents.
type zipFile struct {
	rel  string // path inside the module
	name string // path on disk
	data []byte // when not nil, the contents instead of the file's
}

func (f zipFile) Path() string { return f.rel }

func (f zipFile) Lstat() (os.FileInfo, error) {
	fi, err := os.Lstat(f.name)
	if err != nil || f.data == nil {
		return fi, err
	}
	return sizedInfo{fi, int64(len(f.data))}, nil
}

func (f zipFile) Open() (io.ReadCloser, error) {
	if f.data != nil {
		return io.NopCloser(bytes.NewReader(f.data)), nil
	}
	return os.Open(f.name)
}

type sizedInfo struct {
	os.FileInfo
	size int64
}

func (s sizedInfo) Size() int64 { return s.size }

func cmdProxy(args []string) error {
	fl := flag.NewFlagSet("proxy", flag.ExitOnError)
	v := fl.String("version", "", "the version every tagged module is published at")
	out := fl.String("out", "", "the proxy directory to write (GOPROXY=file://DIR)")
	fl.Parse(args)
	if *v == "" || *out == "" || fl.NArg() != 0 {
		usage()
	}
	if err := checkVersion(*v); err != nil {
		return err
	}
	mods, err := loadModules()
	if err != nil {
		return err
	}
	files, err := treeFiles()
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{*v, commitTime()})
	if err != nil {
		return err
	}
	for _, m := range mods {
		if !m.Tagged {
			continue
		}
		gomod, _, err := rewriteGoMod(m, mods, *v)
		if err != nil {
			return err
		}
		prefix := m.Dir + "/"
		if m.Dir == "." {
			prefix = ""
		}
		zfiles, err := moduleZipFiles(files, prefix, gomod)
		if err != nil {
			return fmt.Errorf("%s: %v", m.Path, err)
		}
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		dir := filepath.Join(*out, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		var zbuf bytes.Buffer
		if err := modzip.Create(&zbuf, module.Version{Path: m.Path, Version: *v}, zfiles); err != nil {
			return fmt.Errorf("%s: %v", m.Path, err)
		}
		writes := []struct {
			name string
			data []byte
		}{
			{*v + ".zip", zbuf.Bytes()},
			{*v + ".mod", gomod},
			{*v + ".info", info},
			{"list", []byte(*v + "\n")},
		}
		for _, w := range writes {
			if err := os.WriteFile(filepath.Join(dir, w.name), w.data, 0o666); err != nil {
				return err
			}
		}
		n, err := zipEntries(module.Version{Path: m.Path, Version: *v}, zbuf.Bytes())
		if err != nil {
			return err
		}
		fmt.Printf("proxy: %s@%s (%d files, %d bytes)\n", m.Path, *v, n, zbuf.Len())
	}
	return nil
}

// licenseFile is the license every released module carries, at the root of
// the repository and of each module zip.
const licenseFile = "LICENSE"

// moduleZipFiles lists the files of the module whose files in the tree start
// with prefix ("" for the root module): its own files, go.mod's contents
// replaced by gomod, and the root's LICENSE for a nested module that has none
// of its own, as the go command does when it makes a module zip from a
// repository. A module that would ship without a license is an error.
func moduleZipFiles(files []string, prefix string, gomod []byte) ([]modzip.File, error) {
	var zfiles []modzip.File
	hasLicense := false
	for _, f := range files {
		rel, ok := strings.CutPrefix(f, prefix)
		if !ok {
			continue
		}
		zf := zipFile{rel: rel, name: filepath.FromSlash(f)}
		if rel == "go.mod" {
			zf.data = gomod
		}
		if rel == licenseFile {
			hasLicense = true
		}
		zfiles = append(zfiles, zf) // files of nested modules: modzip.Create leaves them out
	}
	if !hasLicense && prefix != "" && slices.Contains(files, licenseFile) {
		zfiles = append(zfiles, zipFile{rel: licenseFile, name: licenseFile})
		hasLicense = true
	}
	if !hasLicense {
		return nil, fmt.Errorf("no %s: neither the module nor the repository's root has one", licenseFile)
	}
	return zfiles, nil
}

// zipEntries counts the files of a module zip, as a check that it reads back.
func zipEntries(mv module.Version, data []byte) (int, error) {
	tmp, err := os.CreateTemp("", "modzip-*.zip")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	cf, err := modzip.CheckZip(mv, tmp.Name())
	if err != nil {
		return 0, err
	}
	return len(cf.Valid), nil
}

// commitTime is HEAD's commit time, or now outside a checkout.
func commitTime() time.Time {
	out, err := exec.Command("git", "log", "-1", "--format=%ct").Output()
	if err == nil {
		if s, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil {
			return time.Unix(s, 0).UTC()
		}
	}
	return time.Now().UTC().Truncate(time.Second)
}

// checkVersion accepts what a release of these modules may be called: a
// canonical semantic version (vMAJOR.MINOR.PATCH, an optional pre-release,
// no build metadata), major 0 or 1 (v2 and later need a /vN module path).
func checkVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("%q is not a version like v0.1.0 or v0.1.0-rc.1", v)
	}
	if m := semver.Major(v); m != "v0" && m != "v1" {
		return fmt.Errorf("%s: a major version above v1 needs the /%s suffix on every module path first", v, m)
	}
	return nil
}

func cmdCheckVersion(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		usage()
	}
	if err := checkVersion(args[0]); err != nil {
		return err
	}
	if len(args) == 2 && args[1] != "" && semver.Compare(args[0], args[1]) <= 0 {
		return fmt.Errorf("%s is not after the latest release, %s", args[0], args[1])
	}
	return nil
}

func cmdLatest(in io.Reader, out io.Writer) error {
	var best string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		v := strings.TrimSpace(sc.Text())
		if checkVersion(v) != nil || semver.Prerelease(v) != "" {
			continue
		}
		if best == "" || semver.Compare(v, best) > 0 {
			best = v
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if best != "" {
		fmt.Fprintln(out, best)
	}
	return nil
}

const nextPrefix = "Next version: "

// unreleased returns the lines of the changelog and the index range of its
// Unreleased section's body.
func unreleased(name string) (lines []string, start, end int, err error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, 0, 0, err
	}
	lines = strings.Split(string(data), "\n")
	start = -1
	for i, l := range lines {
		if start < 0 {
			if strings.TrimSpace(l) == "## [Unreleased]" {
				start = i + 1
			}
			continue
		}
		if strings.HasPrefix(l, "## ") {
			return lines, start, i, nil
		}
	}
	if start < 0 {
		return nil, 0, 0, fmt.Errorf("%s: no \"## [Unreleased]\" section", name)
	}
	return lines, start, len(lines), nil
}

func nextVersion(name string) (string, error) {
	lines, start, end, err := unreleased(name)
	if err != nil {
		return "", err
	}
	for _, l := range lines[start:end] {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), nextPrefix); ok {
			v = strings.TrimSpace(v)
			if err := checkVersion(v); err != nil {
				return "", fmt.Errorf("%s: %s%v", name, nextPrefix, err)
			}
			return v, nil
		}
	}
	return "", fmt.Errorf("%s: the Unreleased section has no %q line", name, nextPrefix+"vX.Y.Z")
}

func cmdNext(args []string) error {
	name := "CHANGELOG.md"
	if len(args) == 1 {
		name = args[0]
	} else if len(args) > 1 {
		usage()
	}
	v, err := nextVersion(name)
	if err != nil {
		return err
	}
	fmt.Println(v)
	return nil
}

// breakingAllowed says whether next may break the API of latest. Go's rule
// for v1 and later is a new major version; for v0, which promises nothing
// in Go's terms, sluice's rule is a new minor version, so that a patch
// release is always a safe upgrade.
func breakingAllowed(latest, next string) (bool, string) {
	if semver.Compare(next, latest) <= 0 {
		return false, fmt.Sprintf("the next version %s is not after the latest release %s", next, latest)
	}
	if semver.Major(latest) == "v0" {
		if semver.Major(next) != "v0" || semver.MajorMinor(next) != semver.MajorMinor(latest) {
			return true, fmt.Sprintf("%s bumps the minor version of %s (v0: incompatible changes allowed)", next, latest)
		}
		return false, fmt.Sprintf("%s only bumps the patch version of %s; an incompatible change needs the next minor version (v0)", next, latest)
	}
	if semver.Major(next) != semver.Major(latest) {
		return true, fmt.Sprintf("%s bumps the major version of %s", next, latest)
	}
	return false, fmt.Sprintf("%s keeps the major version of %s; an incompatible change needs a new major version", next, latest)
}

func cmdAllowed(args []string) error {
	if len(args) != 2 {
		usage()
	}
	for _, v := range args {
		if err := checkVersion(v); err != nil {
			return err
		}
	}
	ok, why := breakingAllowed(args[0], args[1])
	fmt.Println(why)
	if !ok {
		os.Exit(1)
	}
	return nil
}

// patchSuccessor is the version after v that a patch release would have:
// v0.1.0 → v0.1.1; a pre-release precedes its release, v0.2.0-rc.1 → v0.2.0.
func patchSuccessor(v string) string {
	if pre := semver.Prerelease(v); pre != "" {
		return strings.TrimSuffix(v, pre)
	}
	mm := semver.MajorMinor(v)
	patch, _ := strconv.Atoi(strings.TrimPrefix(v, mm+"."))
	return fmt.Sprintf("%s.%d", mm, patch+1)
}

func cmdChangelog(args []string) error {
	if len(args) < 2 || len(args) > 3 {
		usage()
	}
	v, date := args[0], args[1]
	name := "CHANGELOG.md"
	if len(args) == 3 {
		name = args[2]
	}
	if err := checkVersion(v); err != nil {
		return err
	}
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		return fmt.Errorf("date %q: want YYYY-MM-DD", date)
	}
	lines, start, end, err := unreleased(name)
	if err != nil {
		return err
	}
	var body []string
	for _, l := range lines[start:end] {
		if !strings.HasPrefix(strings.TrimSpace(l), nextPrefix) {
			body = append(body, l)
		}
	}
	for len(body) > 0 && strings.TrimSpace(body[0]) == "" {
		body = body[1:]
	}
	var out []string
	out = append(out, lines[:start]...)
	out = append(out, "", nextPrefix+patchSuccessor(v), "", fmt.Sprintf("## [%s] - %s", strings.TrimPrefix(v, "v"), date), "")
	out = append(out, body...)
	out = append(out, lines[end:]...)
	return os.WriteFile(name, []byte(strings.Join(out, "\n")), 0o666)
}
