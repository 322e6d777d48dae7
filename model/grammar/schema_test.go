package grammar

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/internal/schematest"
)

func TestSchemaErrors(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type": "string", "pattern": "a+"}`, `"pattern" at # is not supported`},
		{`{"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}}`, `"minimum" at #/properties/a`},
		{`{"oneOf": [{"type": "string"}]}`, `"oneOf"`},
		{`{"type": "string", "format": "email"}`, `"format"`},
		{`{"type": "strin"}`, `unknown type "strin"`},
		{`{"type": "string", "maxItems": 3}`, `"maxItems" does not apply to type "string"`},
		{`{"type": "object", "properties": {"a": {}}, "required": ["b"]}`, `required property "b"`},
		{`{"$ref": "#/$defs/x"}`, `does not name an entry`},
		{`{"type": "string", "minLength": 5, "maxLength": 2}`, `below minLength`},
		{`{"type": "array", "minItems": -1}`, `must be an integer`},
		{`{"enum": []}`, `enum must be a non-empty array`},
		{`false`, `no value is valid`},
		{`{"type": 3}`, `type must be a string`},
		{`{"type": "object"`, `JSON schema`},
		{`{"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}}`, `additionalProperties as a schema`},
	} {
		_, err := SchemaGrammar([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SchemaGrammar(%s) = %v, want an error containing %q", tc.schema, err, tc.want)
		}
	}
}

func TestSchemaExamples(t *testing.T) {
	v := byteVocab(t)
	for _, tc := range []struct {
		schema string
		good   []string
		bad    []string
	}{
		{`{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}`,
			[]string{`{"name": "Ann"}`, `{ "name":"Ann" , "age": 41 }`, "{\n  \"name\": \"A\\\"b\",\n  \"age\": -3\n}"},
			[]string{`{}`, `{"age": 4}`, `{"name": 3}`, `{"name": "x", "age": 1.5}`, `{"name": "x", "other": 1}`}},
		{`{"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"const": "k"}}}`,
			[]string{`{}`, `{"b": null}`, `{"a": true, "c": "k"}`, `{"a": false, "b": null, "c": "k"}`},
			[]string{`{"c": "k", "a": true}`, `{"a": true,}`, `{,}`}},
		{`{"type": "array", "items": {"enum": ["x", 2, null]}, "minItems": 1, "maxItems": 2}`,
			[]string{`["x"]`, `[2, null]`},
			[]string{`[]`, `["x", 2, null]`, `["y"]`}},
		{`{"anyOf": [{"type": "number"}, {"type": "string", "maxLength": 2}]}`,
			[]string{`1.5e3`, `"ab"`, `-0.25`},
			[]string{`"abc"`, `01`, `true`}},
		{`{"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"}`,
			[]string{`{}`, `{"next": {"next": {}}}`},
			[]string{`{"next": 1}`}},
		{`{"type": ["string", "null"]}`, []string{`null`, `"é字"`}, []string{`1`}},
		{`{"type": "object", "additionalProperties": {"type": "integer"}}`, []string{`{"x": 1, "y": 2}`}, []string{`{"x": "1"}`}},
		{`{"type": "object", "additionalProperties": false}`, []string{`{}`, `{ }`}, []string{`{"a": 1}`}},
		{`{}`, []string{`[1, {"a": [true]}]`, `"s"`}, []string{`[1,]`}},
	} {
		src, err := SchemaGrammar([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		g, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: the compiled grammar does not parse: %v\n%s", tc.schema, err, src)
		}
		for _, s := range tc.good {
			if fits, complete := matchText(t, g, v, s); !fits || !complete {
				t.Errorf("%s: %s was refused", tc.schema, s)
			}
		}
		for _, s := range tc.bad {
			if fits, complete := matchText(t, g, v, s); fits && complete {
				t.Errorf("%s: %s was accepted", tc.schema, s)
			}
		}
	}
}

// TestRandomSchemas generates from 100 random schemas by random walks over
// the allowed bytes and checks that every text parses as JSON and
// validates against its schema.
func TestRandomSchemas(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	v := byteVocab(t)
	for i := range 100 {
		s := schematest.Random(r)
		sb, _ := json.Marshal(s)
		src, err := SchemaGrammar(sb)
		if err != nil {
			t.Fatalf("schema %d %s: %v", i, sb, err)
		}
		g, err := Parse(src)
		if err != nil {
			t.Fatalf("schema %d %s: %v\n%s", i, sb, err, src)
		}
		m, err := g.NewMatcher(v)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for !m.Finished() {
			if len(out) > 10000 {
				t.Fatalf("schema %d %s: no end after %q", i, sb, out)
			}
			mask, err := m.Allowed()
			if err != nil {
				t.Fatal(err)
			}
			var allowed []int32
			for id := range int32(257) {
				if mask[id/64]&(1<<(id%64)) != 0 {
					allowed = append(allowed, id)
				}
			}
			if len(allowed) == 0 {
				t.Fatalf("schema %d %s: nothing allowed after %q (accepting %v, pending %+v, stacks %d)", i, sb, out, m.Accepting(), m.p, len(m.st.stacks))
			}
			id := allowed[r.IntN(len(allowed))]
			if m.Accepting() && r.IntN(4) == 0 {
				id = 256
			}
			if err := m.Accept(id); err != nil {
				t.Fatal(err)
			}
			if id != 256 {
				out = append(out, byte(id))
			}
		}
		var val any
		d := json.NewDecoder(bytes.NewReader(out))
		d.UseNumber()
		if err := d.Decode(&val); err != nil {
			t.Fatalf("schema %d %s: %q is not JSON: %v", i, sb, out, err)
		}
		// The schema as validate reads it: ints stay ints.
		if err := schematest.Validate(s, val); err != nil {
			t.Errorf("schema %d %s: %q: %v", i, sb, out, err)
		}
	}
}
