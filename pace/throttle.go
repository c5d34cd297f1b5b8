package pace

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// awsThrottlingCodes are the error codes the AWS SDKs treat as throttling.
var awsThrottlingCodes = [...]string{
	"ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded",
	"Throttling", "ThrottledException", "RequestThrottledException",
	"RequestThrottled", "SlowDown", "ProvisionedThroughputExceededException",
	"TransactionInProgressException", "PriorRequestNotComplete", "BandwidthLimitExceeded",
	"LimitExceededException", "EC2ThrottledException", "RequestTimeTooSkewed",
}

// sniffLimit is how much of an error body is read to look for an AWS
// throttling code.
const sniffLimit = 4 << 10

// isThrottled reports whether resp says the caller was throttled: a 429;
// a 503 with a delay; a 403 with a delay or no requests left (GitHub's
// secondary limits); an AWS throttling error code in X-Amzn-ErrorType or,
// for a 400 or a 503, in the first bytes of the body. A body that is read
// to find out is put back, so the caller receives it unchanged.
func isThrottled(resp *http.Response, o *observation) bool {
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		if o.HasRetryAfter || (o.HasRemaining && o.Remaining == 0) {
			return true
		}
	case http.StatusServiceUnavailable:
		if o.HasRetryAfter {
			return true
		}
	}
	if v := first(resp.Header, hAmznErrType); v != "" {
		code, _, _ := cutByte(v, ':')
		return isAWSThrottlingCode(code)
	}
	if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusServiceUnavailable {
		return false
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return false
	}
	prefix, err := io.ReadAll(io.LimitReader(resp.Body, sniffLimit))
	resp.Body = &prefixedBody{r: io.MultiReader(bytes.NewReader(prefix), &errAfter{resp.Body, err}), c: resp.Body}
	return awsThrottling(prefix)
}

func isAWSThrottlingCode(code string) bool {
	code = trimSpace(code)
	if i := strings.LastIndexByte(code, '#'); i >= 0 { // "aws.protocoltests#ThrottlingException"
		code = code[i+1:]
	}
	for _, c := range awsThrottlingCodes {
		if code == c {
			return true
		}
	}
	return false
}

// awsThrottling reports whether an AWS error body (JSON "__type" or
// "code", or XML <Code>) names a throttling error such as
// ThrottlingException.
func awsThrottling(body []byte) bool {
	for _, c := range awsThrottlingCodes {
		for rest := body; ; {
			i := bytes.Index(rest, []byte(c))
			if i < 0 {
				break
			}
			before := byte(0)
			if i > 0 {
				before = rest[i-1]
			}
			after := byte(0)
			if j := i + len(c); j < len(rest) {
				after = rest[j]
			}
			if (before == '"' || before == '#' || before == '>') && (after == '"' || after == '<') {
				return true
			}
			rest = rest[i+len(c):]
		}
	}
	return false
}

// prefixedBody delivers the bytes read ahead and then the rest of the
// original body, and closes the original.
type prefixedBody struct {
	r io.Reader
	c io.Closer
}

func (b *prefixedBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *prefixedBody) Close() error               { return b.c.Close() }

// errAfter reads r, unless reading ahead already met an error other than
// the end: then it reports that error, as the body would have.
type errAfter struct {
	r   io.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return e.r.Read(p)
}
