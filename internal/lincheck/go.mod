module github.com/sluicehq/sluice/internal/lincheck

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sluicehq/sluice v0.2.0
	github.com/sluicehq/sluice/redis v0.2.0
	golang.org/x/time v0.16.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// Why replace, with go.work there: go.work builds this module against the
// repository's tree, but go mod tidy (and tidy -diff, and any GOWORK=off
// build) ignore go.work; without these lines they would look the required
// versions up in the module proxy, which holds none before the release is
// tagged and never this tree's changes since. A consumer ignores a
// dependency's replace directives and resolves the required versions;
// scripts/consumer.sh checks that it can.
replace github.com/sluicehq/sluice => ../..

replace github.com/sluicehq/sluice/redis => ../../redis
