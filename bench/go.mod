module github.com/sluicehq/sluice/bench

go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
)

require (
	github.com/sethvargo/go-limiter v0.7.1
	github.com/sluicehq/sluice v0.2.0
	github.com/throttled/throttled/v2 v2.15.0
	go.uber.org/ratelimit v0.3.1
	golang.org/x/time v0.16.0
)

// Why replace, with go.work there: go.work builds this module against the
// repository's tree, but go mod tidy (and tidy -diff, and any GOWORK=off
// build) ignore go.work; without these lines they would look the required
// versions up in the module proxy, which holds none before the release is
// tagged and never this tree's changes since. A consumer ignores a
// dependency's replace directives and resolves the required versions;
// scripts/consumer.sh checks that it can.
replace github.com/sluicehq/sluice => ../
