// Package chat turns a conversation into the prompt text a chat model was
// trained on.
//
// A GGUF file carries its prompt format as a Jinja template under the key
// tokenizer.chat_template. [Parse] compiles such a template (with
// github.com/ardanlabs/jinja, configured like Hugging Face's renderer:
// trim_blocks and lstrip_blocks on) and [Template.Render] fills it with
// messages, tool definitions and the switches llama.cpp's server passes
// (add_generation_prompt, enable_thinking, clear_thinking). [GLM5] is a
// built-in Go rendition of the GLM-4.7/GLM-5 format for files that have no
// template.
//
// JSON values (tool definitions, tool-call arguments) keep their key order,
// and tojson writes them as Python's json.dumps does (", " and ": "
// separators, no ASCII escaping), because the rendered text is tokenized and
// must match what the model saw in training byte for byte.
//
// Rendering follows llama.cpp's Jinja engine where it differs from Python's
// Jinja2: a variable set inside a for loop keeps its value in the following
// iterations (it still disappears when the loop ends). Known differences
// from both: floats with an integral value print without ".0" (3.0 as 3),
// and attribute access with a number (x.0) does not index lists.
//
// The package renders text only; tokenizing the prompt and parsing the
// model's reply (reasoning, tool calls) belong elsewhere.
package chat
