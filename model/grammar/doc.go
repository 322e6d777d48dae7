// Package grammar constrains decoding to a formal language: a GBNF grammar
// (the notation llama.cpp's server takes in its "grammar" field) or a JSON
// Schema compiled to one.
//
// Besides literals, classes, "." and rule references, a grammar may name a
// token by its id, <[N]> (llama.cpp's notation): it matches exactly that
// token, whatever its text, which is how a grammar lets through control
// tokens such as GLM's <tool_call>, whose text is never generated. A
// token that both a reference and the text could match is taken as the
// reference.
//
// Parse compiles GBNF text into a Grammar. A Matcher follows one generation
// through it: Allowed reports, for the current position, which tokens of a
// Vocab may come next (a token is allowed when all of its bytes can be
// matched, and an end-of-generation token when the text so far is a complete
// sentence of the grammar); Accept moves past a chosen token. The matcher
// keeps the set of parse stacks a pushdown automaton would hold, so any
// context-free grammar without left recursion works, and it walks a byte trie
// of the vocabulary so that a mask costs what the allowed prefixes cost, not
// one full match per token. Masks are cached per parser state: the states
// inside a string or a number repeat from token to token.
//
// SchemaGrammar translates the JSON Schema subset structured output needs
// (objects with required and optional properties, arrays, strings, numbers,
// integers, booleans, null, enum, const, anyOf, local $ref) into GBNF. A
// keyword outside that subset is an error naming it, never ignored.
package grammar
