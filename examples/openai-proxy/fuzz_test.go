package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseRequest: no body panics the parser; an accepted body has an
// estimate of at least 4 tokens per message, its forwarded form is JSON
// that parses to the same request, and a streaming one asks for usage.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hé"},{"type":"image_url","image_url":{"url":"x"}}]}],"stream":true,"stream_options":{"include_usage":false},"max_tokens":9,"n":3}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}],"tools":[{"type":"function"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"max_completion_tokens":2147483647,"n":128}`))
	f.Add([]byte(`{"model":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, perr := parseRequest(data)
		if perr != nil {
			if perr.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		var msgs struct{ Messages []json.RawMessage }
		_ = json.Unmarshal(data, &msgs)
		if req.prompt < 4*int64(len(msgs.Messages)) || req.output < 0 || req.estimate() < 0 {
			t.Fatalf("prompt %d output %d for %d messages", req.prompt, req.output, len(msgs.Messages))
		}
		again, perr := parseRequest(req.body)
		if perr != nil {
			t.Fatalf("forwarded body rejected: %v\n%s", perr, req.body)
		}
		if again.model != req.model || again.stream != req.stream || again.output != req.output {
			t.Fatalf("forwarded body parses differently: %+v vs %+v", again, req)
		}
		if req.stream && !again.wantUsage {
			t.Fatalf("streaming request forwarded without include_usage: %s", req.body)
		}
	})
}

// FuzzRelaySSE: any upstream stream is relayed without a panic; without
// stripping, the client receives the stream byte for byte (at most the
// blank line that ends the last event is added).
func FuzzRelaySSE(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{\"total_tokens\":7}}\n\ndata: [DONE]\n\n"), true)
	f.Add([]byte(": comment\r\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}}]}\r\n\r\ndata: x"), false)
	f.Add([]byte("data: {\"choices\":[],\ndata: \"usage\":{\"prompt_tokens\":1}}\n\n"), true)
	f.Fuzz(func(t *testing.T, stream []byte, strip bool) {
		var out bytes.Buffer
		res, err := relaySSE(&out, func() error { return nil }, bytes.NewReader(stream), strip)
		if err != nil {
			t.Fatalf("relay of an in-memory stream failed: %v", err)
		}
		if res.chars < 0 {
			t.Fatalf("negative text count %d", res.chars)
		}
		if strip {
			if out.Len() > len(stream)+2 {
				t.Fatalf("relayed %d bytes of %d", out.Len(), len(stream))
			}
			return
		}
		got := out.String()
		if !strings.HasPrefix(got, string(stream)) || len(got) > len(stream)+2 || strings.Trim(got[len(stream):], "\n") != "" {
			t.Fatalf("relayed %q\nof %q", got, stream)
		}
	})
}
