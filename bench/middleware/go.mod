module github.com/sluicehq/sluice/bench/middleware

go 1.26.0

require (
	github.com/go-chi/httprate v0.16.1
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/sluicehq/sluice v0.2.0
	github.com/sluicehq/sluice/grpclimit v0.2.0
	golang.org/x/time v0.16.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/zeebo/xxh3 v1.0.2 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// Why replace, with go.work there: go.work builds this module against the
// repository's tree, but go mod tidy (and tidy -diff, and any GOWORK=off
// build) ignore go.work; without these lines they would look the required
// versions up in the module proxy, which holds none before the release is
// tagged and never this tree's changes since. A consumer ignores a
// dependency's replace directives and resolves the required versions;
// scripts/consumer.sh checks that it can.
replace (
	github.com/sluicehq/sluice => ../../
	github.com/sluicehq/sluice/grpclimit => ../../grpclimit
)
