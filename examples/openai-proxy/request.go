package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Token estimation heuristics (see the package documentation).
const (
	charsPerToken    = 4   // one token per 4 characters of text, rounded up
	tokensPerMessage = 4   // framing of each message (role, separators)
	tokensPerPart    = 765 // a non-text content part (image, audio, file)
	maxOutputTokens  = 1<<31 - 1
	maxChoices       = 128
)

// chatRequest is what the proxy needs of a chat completions request.
type chatRequest struct {
	model     string
	stream    bool
	wantUsage bool  // the client set stream_options.include_usage itself
	prompt    int64 // estimated input tokens
	output    int64 // output tokens reserved: max_tokens × n, 0 when unbounded
	body      []byte
}

// estimate is what Reserve takes: input and reserved output.
func (c *chatRequest) estimate() int {
	return clampInt(c.prompt + c.output)
}

func clampInt(n int64) int {
	const maxInt = int64(^uint(0) >> 1)
	if n > maxInt {
		return int(maxInt)
	}
	return int(n)
}

// requestError is a client error in the request body: param names the field
// (OpenAI's "param"), msg says what is wrong with it.
type requestError struct {
	param string
	msg   string
}

func (e *requestError) Error() string {
	if e.param == "" {
		return e.msg
	}
	return e.param + ": " + e.msg
}

func badParam(param, format string, args ...any) *requestError {
	return &requestError{param: param, msg: fmt.Sprintf(format, args...)}
}

// parseRequest validates a chat completions body, estimates its tokens and
// builds the body to forward: the client's own fields, unchanged, with
// stream_options.include_usage set on a streaming request.
func parseRequest(data []byte) (*chatRequest, *requestError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		msg := "the request body is not a JSON object"
		if err != nil {
			msg += ": " + err.Error()
		}
		return nil, &requestError{msg: msg}
	}
	req := &chatRequest{}
	if err := json.Unmarshal(top["model"], &req.model); err != nil || req.model == "" {
		return nil, badParam("model", "must be a non-empty string")
	}
	var messages []json.RawMessage
	if err := json.Unmarshal(top["messages"], &messages); err != nil || len(messages) == 0 {
		return nil, badParam("messages", "must be a non-empty array of messages")
	}
	var chars, parts int64
	for i, raw := range messages {
		c, p, err := messageChars(raw, i)
		if err != nil {
			return nil, err
		}
		chars += c
		parts += p
	}
	if tools, ok := top["tools"]; ok && !isNull(tools) {
		chars += int64(utf8.RuneCount(tools)) // the definitions are part of the prompt
	}
	req.prompt = ceilDiv(chars, charsPerToken) + tokensPerMessage*int64(len(messages)) + tokensPerPart*parts

	var maxOut int64
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		n, set, err := optInt(top, name, 0, maxOutputTokens)
		if err != nil {
			return nil, err
		}
		if set && n > maxOut {
			maxOut = n
		}
	}
	choices, set, err := optInt(top, "n", 1, maxChoices)
	if err != nil {
		return nil, err
	}
	if !set {
		choices = 1
	}
	req.output = maxOut * choices

	if raw, ok := top["stream"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.stream); err != nil {
			return nil, badParam("stream", "must be a boolean")
		}
	}
	if req.stream {
		opts := map[string]json.RawMessage{}
		if raw, ok := top["stream_options"]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &opts); err != nil {
				return nil, badParam("stream_options", "must be an object")
			}
		}
		if raw, ok := opts["include_usage"]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &req.wantUsage); err != nil {
				return nil, badParam("stream_options.include_usage", "must be a boolean")
			}
		}
		opts["include_usage"] = json.RawMessage("true")
		top["stream_options"], _ = json.Marshal(opts)
	}
	body, err2 := json.Marshal(top)
	if err2 != nil { // cannot happen: every value was parsed from valid JSON
		return nil, &requestError{msg: "re-encoding the request: " + err2.Error()}
	}
	req.body = body
	return req, nil
}

// messageChars counts the characters of message i's text (content, name,
// tool call names and arguments) and its non-text content parts.
func messageChars(raw json.RawMessage, i int) (chars, parts int64, err *requestError) {
	where := "messages[" + strconv.Itoa(i) + "]"
	var m struct {
		Role      json.RawMessage `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      json.RawMessage `json:"name"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	if e := json.Unmarshal(raw, &m); e != nil || isNull(raw) {
		return 0, 0, badParam(where, "must be an object")
	}
	var role string
	if e := json.Unmarshal(m.Role, &role); e != nil || role == "" {
		return 0, 0, badParam(where+".role", "must be a non-empty string")
	}
	if len(m.Name) > 0 && !isNull(m.Name) {
		var name string
		if e := json.Unmarshal(m.Name, &name); e != nil {
			return 0, 0, badParam(where+".name", "must be a string")
		}
		chars += int64(utf8.RuneCountInString(name))
	}
	switch c := bytes.TrimSpace(m.Content); {
	case len(c) == 0 || isNull(c):
	case c[0] == '"':
		var s string
		if e := json.Unmarshal(c, &s); e != nil {
			return 0, 0, badParam(where+".content", "is not a valid string")
		}
		chars += int64(utf8.RuneCountInString(s))
	case c[0] == '[':
		var list []struct {
			Type string          `json:"type"`
			Text json.RawMessage `json:"text"`
		}
		if e := json.Unmarshal(c, &list); e != nil {
			return 0, 0, badParam(where+".content", "must be an array of content parts")
		}
		for j, p := range list {
			if p.Type != "text" {
				parts++
				continue
			}
			var s string
			if e := json.Unmarshal(p.Text, &s); e != nil {
				return 0, 0, badParam(fmt.Sprintf("%s.content[%d].text", where, j), "must be a string")
			}
			chars += int64(utf8.RuneCountInString(s))
		}
	default:
		return 0, 0, badParam(where+".content", "must be a string or an array of content parts")
	}
	if len(m.ToolCalls) > 0 && !isNull(m.ToolCalls) {
		var calls []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		}
		if e := json.Unmarshal(m.ToolCalls, &calls); e != nil {
			return 0, 0, badParam(where+".tool_calls", "must be an array of tool calls")
		}
		for _, tc := range calls {
			chars += int64(utf8.RuneCountInString(tc.Function.Name) + utf8.RuneCountInString(tc.Function.Arguments))
		}
	}
	return chars, parts, nil
}

// optInt reads an optional integer field in [lo, hi].
func optInt(top map[string]json.RawMessage, name string, lo, hi int64) (int64, bool, *requestError) {
	raw, ok := top[name]
	if !ok || isNull(raw) {
		return 0, false, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil || n < lo || n > hi {
		return 0, false, badParam(name, "must be an integer from %d to %d", lo, hi)
	}
	return n, true, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// textTokens estimates the tokens of generated text with the input heuristic.
func textTokens(chars int64) int64 { return ceilDiv(chars, charsPerToken) }
