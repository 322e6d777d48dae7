// Package server is glmrun's OpenAI-compatible HTTP API: the handler behind
// "glmrun serve".
//
// It answers GET /v1/models, POST /v1/chat/completions, POST /v1/completions,
// GET /health and GET /metrics (Prometheus text format), with the request and
// response shapes of OpenAI's API and the conventions of llama.cpp's
// llama-server and vLLM where OpenAI says nothing: GLM thinking is returned as
// reasoning_content beside content and switched per request with
// chat_template_kwargs {"enable_thinking": false}; GLM tool calls
// (<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>)
// become OpenAI tool_calls when the request has tools. Streaming answers are
// Server-Sent Events ("data: {...}\n\n" chunks ending with "data: [DONE]"),
// flushed per token, never splitting a UTF-8 character.
//
// One scheduler goroutine owns the model: up to Config.Parallel sequences,
// each with its own KV cache slot, advance together, one token each per step
// (continuous batching); a new request is prefilled between steps and then
// joins the step. Requests beyond the slots wait in a bounded queue, and a full
// queue answers 503. A request whose client goes away is dropped at the next
// step and its slot freed. A step is one batched pass (model.DecodeBatch):
// with a model loaded with batch-invariant products (model.Options,
// "glmrun serve --batch-invariant") every request gets the tokens it gets
// alone; by default steps of 16 or more sequences agree with that within
// float rounding, as llama-server's and vLLM's batches do.
//
// Errors have OpenAI's shape, {"error": {"message", "type", "param", "code"}}:
// 400 for malformed JSON and invalid parameters, 401 for a missing or wrong API
// key, 404 for an unknown model, 413 for a request body over the limit or a
// prompt that does not fit the context, 503 for a full queue.
//
// The package runs what it is given and logs nothing: loading the model and
// listening on a socket belong to the caller (cmd/glmrun).
package server
