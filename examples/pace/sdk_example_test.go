package main

// The README's SDK snippet is the body of this example, verbatim
// (TestReadmeSnippetsAreExamples in the root package checks it). It only
// builds the clients: calling the APIs needs keys.

import (
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	antoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"

	"github.com/sluicehq/sluice/pace"
)

func Example_sdks() {
	// One pacer for the process: each API key on each host is its own
	// upstream. It retries a 429 after its full Retry-After and holds every
	// other call to that upstream until then. The SDKs would retry too, each
	// call on its own (openai-go follows a server's delay up to 2 minutes
	// and gives up beyond it, anthropic-sdk-go follows any delay; both cap
	// only their own backoff, at 8 s): their retries are switched off, so
	// that the pacer alone retries.
	paced := &http.Client{Transport: pace.New(http.DefaultTransport, pace.WithRetry(3))}

	oai := openai.NewClient(oaioption.WithHTTPClient(paced),
		oaioption.WithMaxRetries(0))
	claude := anthropic.NewClient(antoption.WithHTTPClient(paced),
		antoption.WithMaxRetries(0))
	_, _ = oai, claude
}
