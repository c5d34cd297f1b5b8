package examples_test

import (
	"bytes"
	"context"
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// defaultRunShows is, for every example, a line its run with no flags
// prints when it shows what it demonstrates. A new example must add itself
// here (TestEveryExampleIsListed).
var defaultRunShows = map[string]string{
	"ecs":          "ListClusters 0/50 (ThrottlingException: Rate exceeded, retry after 50ms)",
	"envoy-rls":    "  login 4: OVER_LIMIT",
	"fleet":        "(no -redis address: shared runs skipped)",
	"gateway":      "alice my-target  readData   THROTTLED  per-tool/targetName=my-target,toolName=readData (entry my-target,readData), retry after 200ms",
	"grpc":         `call 3: ResourceExhausted "sluice: rate limit exceeded for per-caller/caller=alice (requests), retry after 500ms"`,
	"http":         "GET /report        as erin   429 Too Many Requests",
	"mcp":          `  {"jsonrpc":"2.0","id":3,"error":{"code":-32003,"message":"Rate limit exceeded","data":{"limitKey":"per-tool/targetName=my-target,toolName=readData","metric":"requests","retryAfter":1}}}`,
	"metrics":      "  sluice_config_refresh_errors_total 1",
	"openai-proxy": "  (answered by the proxy: the upstream was not called)",
	"pace":         "paced",
	"shardmodel":   "predicted 429s: 6.8531/s over the fleet",
}

// refusal is a command line an example must refuse: a non-zero exit status
// and exactly one line on stderr, containing want.
type refusal struct {
	args []string
	want string
}

// addrs are the addresses and files the refusals name.
type addrs struct {
	closed string // a loopback host:port nothing listens on
	busy   string // a loopback host:port the test listens on
	dir    string // the examples directory, absolute
}

// refusals are, for every example, a flag out of range (or, for the
// examples that take none, an argument), and for every flag naming an
// address, a closed port (a server or Redis to reach) or a busy one (an
// address to listen on).
func refusals(a addrs) map[string][]refusal {
	envoyConfig := filepath.Join(a.dir, "envoy-rls", "ratelimit.yaml")
	limits := filepath.Join(a.dir, "metrics", "limits.json")
	return map[string][]refusal{
		"ecs":     {{[]string{"-v"}, `unexpected argument "-v"`}},
		"gateway": {{[]string{"extra"}, `unexpected argument "extra"`}},
		"envoy-rls": {
			{[]string{"-config", envoyConfig, "-reload", "1ns"}, "-reload 1ns"},
			{[]string{"-config", envoyConfig, "-redis", a.closed}, "-redis " + a.closed},
			{[]string{"-config", envoyConfig, "-addr", a.busy}, "-addr " + a.busy},
		},
		"fleet": {
			{[]string{"-seconds", "0"}, "-seconds 0"},
			{[]string{"-redis", a.closed}, "-redis " + a.closed},
		},
		"grpc": {
			{[]string{"-client", "-n", "0"}, "-n 0"},
			{[]string{"-client", "-addr", a.closed}, "-addr " + a.closed},
			{[]string{"-addr", a.busy}, "-addr " + a.busy},
		},
		"http": {
			{[]string{"-format", "xml"}, `-format "xml"`},
			{[]string{"-addr", a.busy}, "-addr " + a.busy},
		},
		"mcp": {
			{[]string{"-code", "0"}, "-code 0"},
			{[]string{"-addr", a.busy}, "-addr " + a.busy},
		},
		"metrics": {
			{[]string{"-addr", "127.0.0.1:0", "-config", limits, "-interval", "0s"}, "-interval 0s"},
			{[]string{"-addr", a.busy}, "-addr " + a.busy},
		},
		"openai-proxy": {
			{[]string{"-addr", "127.0.0.1:0", "-upstream", "ftp://example.com"}, `-upstream "ftp://example.com"`},
			{[]string{"-addr", "127.0.0.1:0", "-upstream", "http://" + a.closed + "/v1"}, "-upstream http://" + a.closed + "/v1"},
			{[]string{"-addr", a.busy}, "-addr " + a.busy},
		},
		"pace": {
			{[]string{"-workers", "0"}, "-workers 0"},
			{[]string{"-url", "http://" + a.closed + "/hello"}, "-url http://" + a.closed + "/hello"},
			{[]string{"-fleet", "-redis", a.closed}, "-redis " + a.closed},
		},
		"shardmodel": {{[]string{"-shards", "0"}, "-shards 0"}},
	}
}

// mainDirs returns the directories under the examples module that hold a
// main package, relative and slash-separated ("pace", "shardmodel"; not
// "shardmodel/model").
func mainDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if dir := filepath.ToSlash(filepath.Dir(path)); f.Name.Name == "main" && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	if len(dirs) == 0 {
		t.Fatal("no main package under the examples directory")
	}
	return dirs
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds every example once, with one go command, and returns the
// directory holding them, each named after its directory.
func binaries(t *testing.T) string {
	t.Helper()
	dirs := mainDirs(t)
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "sluice-examples-"); buildErr != nil {
			return
		}
		// go test puts its own GOROOT/bin first in PATH: this is the go
		// command running the test.
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		// Without symbol tables and DWARF: linking is most of the time.
		args := []string{"build", "-ldflags=-s -w", "-o", binDir + string(filepath.Separator)}
		for _, d := range dirs {
			args = append(args, "./"+d)
		}
		out, err := exec.Command(goTool, args...).CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out) + err.Error())
		}
	})
	if buildErr != nil {
		t.Fatalf("building the examples: %v", buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// run runs example name with args from an empty directory, so that none
// depends on files in the current directory, and ends it if it is still
// running after a minute.
func run(t *testing.T, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binaries(t), filepath.Base(name)), args...)
	cmd.Dir = t.TempDir()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %q still running after a minute; stdout:\n%s\nstderr:\n%s", name, args, out.String(), errOut.String())
	}
	return out.String(), errOut.String(), err
}

// Every example has an expected line for its default run and a refusal:
// a new one cannot be forgotten.
func TestEveryExampleIsListed(t *testing.T) {
	dirs := mainDirs(t)
	refused := refusals(addrs{})
	for _, d := range dirs {
		if _, ok := defaultRunShows[d]; !ok {
			t.Errorf("example %s: no entry in defaultRunShows (what its run with no flags must print)", d)
		}
		if len(refused[d]) == 0 {
			t.Errorf("example %s: no entry in refusals (a flag out of range, and a closed or busy address for each address flag)", d)
		}
	}
	for name := range defaultRunShows {
		if !slices.Contains(dirs, name) {
			t.Errorf("defaultRunShows names %s, which is not an example's directory", name)
		}
	}
	for name := range refused {
		if !slices.Contains(dirs, name) {
			t.Errorf("refusals names %s, which is not an example's directory", name)
		}
	}
}

// Every example, run with no flags and no other process, exits 0, prints
// what it demonstrates and nothing on stderr.
func TestDefaultRuns(t *testing.T) {
	for _, name := range mainDirs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each on a loopback port of its own, in a directory of its own
			want, ok := defaultRunShows[name]
			if !ok {
				t.Skip("not listed (TestEveryExampleIsListed fails)")
			}
			stdout, stderr, err := run(t, name)
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
			if stderr != "" {
				t.Errorf("stderr not empty:\n%s", stderr)
			}
		})
	}
}

// A flag out of range, a server or Redis that cannot be reached and an
// address that cannot be listened on are each one line on stderr naming
// the flag, and a non-zero exit status.
func TestRefusals(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	all := refusals(addrs{closed: closedAddr, busy: busy.Addr().String(), dir: dir})
	for _, name := range mainDirs(t) {
		for _, r := range all[name] {
			t.Run(name+" "+strings.ReplaceAll(strings.Join(r.args, " "), dir+string(filepath.Separator), ""), func(t *testing.T) {
				stdout, stderr, err := run(t, name, r.args...)
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
					t.Errorf("exit: %v, want a non-zero status", err)
				}
				line, _ := strings.CutSuffix(stderr, "\n")
				if line == "" || strings.Contains(line, "\n") || !strings.Contains(line, r.want) {
					t.Errorf("stderr %q, want one line containing %q", stderr, r.want)
				}
				if stdout != "" {
					t.Errorf("printed on stdout:\n%s", stdout)
				}
			})
		}
	}
}
