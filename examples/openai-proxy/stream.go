package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// maxEvent bounds one server-sent event from the upstream.
const maxEvent = 1 << 20

var errEventTooLong = errors.New("upstream sent a server-sent event longer than 1 MiB")

// usage is the usage object of a chat completion or of the final chunk.
type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func (u *usage) total() int64 {
	if u.TotalTokens > 0 {
		return u.TotalTokens
	}
	return u.PromptTokens + u.CompletionTokens
}

// relayResult is what a relayed stream told about its cost.
type relayResult struct {
	usage *usage // from the chunk that carried it; nil when none came
	chars int64  // characters of generated text seen in the deltas
}

// relayError says which side of the relay failed.
type relayError struct {
	client bool // writing to the client failed (it went away)
	err    error
}

func (e *relayError) Error() string { return e.err.Error() }
func (e *relayError) Unwrap() error { return e.err }

// relaySSE copies the upstream's server-sent events to dst one event at a
// time, calling flush after each, and reads the usage and the generated text
// of every chat.completion.chunk on the way. With stripUsage, a chunk that
// carries usage and no choices (the one the proxy asked for) is not relayed.
// Events that are not JSON chunks ([DONE], comments, errors) pass unchanged.
func relaySSE(dst io.Writer, flush func() error, src io.Reader, stripUsage bool) (relayResult, error) {
	var res relayResult
	br := bufio.NewReaderSize(src, 64<<10)
	var event, data []byte
	hasData := false
	dispatch := func() error {
		defer func() { event, data, hasData = event[:0], data[:0], false }()
		if len(event) == 0 {
			return nil
		}
		if hasData && inspectChunk(data, &res) && stripUsage {
			return nil
		}
		if _, err := dst.Write(event); err != nil {
			return &relayError{client: true, err: err}
		}
		if err := flush(); err != nil {
			return &relayError{client: true, err: err}
		}
		return nil
	}
	for {
		line, err := readLine(br, maxEvent-len(event))
		if len(line) > 0 {
			event = append(event, line...)
			content := bytes.TrimRight(line, "\r\n")
			switch {
			case len(content) == 0:
				if derr := dispatch(); derr != nil {
					return res, derr
				}
			case bytes.HasPrefix(content, []byte("data:")):
				v := bytes.TrimPrefix(content[len("data:"):], []byte(" "))
				if hasData {
					data = append(data, '\n')
				}
				data = append(data, v...)
				hasData = true
			}
		}
		if err == io.EOF {
			// A last event without its blank line is still relayed.
			if len(event) > 0 && !bytes.HasSuffix(event, []byte("\n")) {
				event = append(event, '\n')
			}
			if len(event) > 0 {
				event = append(event, '\n')
			}
			return res, dispatch()
		}
		if err != nil {
			return res, &relayError{err: err}
		}
	}
}

// readLine reads one line, terminator included, of at most max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, errEventTooLong
		}
		if err == bufio.ErrBufferFull {
			line = append(line, frag...)
			continue
		}
		if line == nil {
			return frag, err
		}
		return append(line, frag...), err
	}
}

// inspectChunk adds a chunk's generated text to res and keeps its usage. It
// reports whether the chunk is a usage-only chunk (usage, no choices).
func inspectChunk(data []byte, res *relayResult) bool {
	if len(data) == 0 || data[0] != '{' {
		return false // [DONE] or not a chunk
	}
	var c struct {
		Choices []struct {
			Delta struct {
				Content   string `json:"content"`
				Refusal   string `json:"refusal"`
				ToolCalls []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
		Usage *usage `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil {
		return false
	}
	for _, ch := range c.Choices {
		d := &ch.Delta
		n := utf8.RuneCountInString(d.Content) + utf8.RuneCountInString(d.Refusal)
		for _, tc := range d.ToolCalls {
			n += utf8.RuneCountInString(tc.Function.Name) + utf8.RuneCountInString(tc.Function.Arguments)
		}
		res.chars += int64(n)
	}
	if c.Usage == nil {
		return false
	}
	res.usage = c.Usage
	return len(c.Choices) == 0
}

// completionChars counts the generated text of a non-streaming response.
func completionChars(body []byte) (*usage, int64) {
	var r struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				Refusal   string `json:"refusal"`
				ToolCalls []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Usage *usage `json:"usage"`
	}
	if json.Unmarshal(body, &r) != nil {
		return nil, 0
	}
	var n int64
	for _, ch := range r.Choices {
		m := &ch.Message
		n += int64(utf8.RuneCountInString(m.Content) + utf8.RuneCountInString(m.Refusal))
		for _, tc := range m.ToolCalls {
			n += int64(utf8.RuneCountInString(tc.Function.Name) + utf8.RuneCountInString(tc.Function.Arguments))
		}
	}
	return r.Usage, n
}
