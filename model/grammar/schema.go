package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// JSONGrammar is the GBNF of any JSON object, what response_format
// {"type": "json_object"} asks for.
const JSONGrammar = "root ::= object\n" + JSONValueRules

// JSONValueRules are the GBNF rules of JSON values, without a root: value,
// object, array, string, number, integer, boolean, null and ws, for a
// grammar that embeds JSON.
const JSONValueRules = `value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
` + jsonTerminals

// jsonTerminals are the rules every JSON grammar uses. Whitespace runs are
// short and numbers have bounded digits, as a JSON writer produces them,
// so that a weak model cannot wander off in them.
const jsonTerminals = `string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
boolean ::= "true" | "false"
null ::= "null"
ws ::= [ \t\n]{0,4}
`

// SchemaGrammar compiles a JSON Schema to GBNF whose sentences are JSON
// texts valid under the schema. Supported: type (one or a list), properties
// with required (properties are written in the schema's order, the
// optional ones may be left out), additionalProperties false (or, with no
// properties, a schema for the values of a free-form object), items,
// minItems, maxItems, minLength, maxLength, enum, const, anyOf, and $ref to
// #/$defs/NAME or #/definitions/NAME. Annotations (title, description,
// default, examples, $schema, $id, $comment) are ignored. Any other keyword
// is an error naming it and where it is.
func SchemaGrammar(schema []byte) (string, error) {
	v, err := decodeOrdered(schema)
	if err != nil {
		return "", fmt.Errorf("grammar: JSON schema: %w", err)
	}
	c := &schemaCompiler{root: v, refs: map[string]string{}}
	top, err := c.compile(v, "#")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("root ::= " + top + "\n")
	for _, r := range c.rules {
		b.WriteString(r + "\n")
	}
	b.WriteString(jsonTerminals)
	if c.anyValue {
		b.WriteString(`value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
`)
	}
	return b.String(), nil
}

// ordered is a JSON object that keeps its keys' order (a JSON Schema's
// properties are written in the order given).
type ordered struct {
	keys []string
	vals map[string]any
}

func decodeOrdered(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, fmt.Errorf("data after the schema")
	}
	return v, nil
}

// maxSchemaDepth bounds nesting, against a hostile schema.
const maxSchemaDepth = 64

func decodeValue(d *json.Decoder, depth int) (any, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxSchemaDepth)
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &ordered{vals: map[string]any{}}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			var a []any
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			if a == nil {
				a = []any{}
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return t, nil
	}
}

// encodeJSON writes v (from decodeOrdered) as compact JSON.
func encodeJSON(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case *ordered:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			encodeJSON(b, v.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeJSON(b, x)
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(v.String())
	default:
		vb, _ := json.Marshal(v)
		b.Write(vb)
	}
}

// Literal returns s as a GBNF string literal, escaped as Parse reads it.
func Literal(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

type schemaCompiler struct {
	root     any
	rules    []string
	n        int
	refs     map[string]string // $ref -> rule name
	anyValue bool              // the generic value rules are needed
}

func (c *schemaCompiler) rule(body string) string {
	c.n++
	name := "r" + strconv.Itoa(c.n)
	c.rules = append(c.rules, name+" ::= "+body)
	return name
}

var annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"$schema": true, "$id": true, "$comment": true, "$defs": true, "definitions": true}

var known = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true, "minLength": true, "maxLength": true, "enum": true,
	"const": true, "anyOf": true, "$ref": true}

// compile returns a GBNF expression (a rule name or a literal) for schema
// s found at path.
func (c *schemaCompiler) compile(s any, path string) (string, error) {
	switch s := s.(type) {
	case bool:
		if !s {
			return "", fmt.Errorf("grammar: schema %s is false: no value is valid", path)
		}
		c.anyValue = true
		return "value", nil
	case *ordered:
		return c.compileObject(s, path)
	}
	return "", fmt.Errorf("grammar: schema %s must be an object or a boolean", path)
}

func (c *schemaCompiler) compileObject(s *ordered, path string) (string, error) {
	for _, k := range s.keys {
		if !known[k] && !annotations[k] {
			return "", fmt.Errorf("grammar: schema keyword %q at %s is not supported", k, path)
		}
	}
	if ref, ok := s.vals["$ref"]; ok {
		if len(s.keys) > 1 {
			for _, k := range s.keys {
				if k != "$ref" && !annotations[k] {
					return "", fmt.Errorf("grammar: schema %s: $ref next to %q is not supported", path, k)
				}
			}
		}
		return c.compileRef(ref, path)
	}
	if e, ok := s.vals["enum"]; ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 {
			return "", fmt.Errorf("grammar: schema %s: enum must be a non-empty array", path)
		}
		alts := make([]string, len(list))
		for i, x := range list {
			var b bytes.Buffer
			encodeJSON(&b, x)
			alts[i] = Literal(b.String())
		}
		return c.rule(strings.Join(alts, " | ")), nil
	}
	if x, ok := s.vals["const"]; ok {
		var b bytes.Buffer
		encodeJSON(&b, x)
		return Literal(b.String()), nil
	}
	if a, ok := s.vals["anyOf"]; ok {
		list, ok := a.([]any)
		if !ok || len(list) == 0 {
			return "", fmt.Errorf("grammar: schema %s: anyOf must be a non-empty array", path)
		}
		for _, k := range s.keys {
			if k != "anyOf" && !annotations[k] {
				return "", fmt.Errorf("grammar: schema %s: anyOf next to %q is not supported", path, k)
			}
		}
		alts := make([]string, len(list))
		for i, x := range list {
			r, err := c.compile(x, fmt.Sprintf("%s/anyOf/%d", path, i))
			if err != nil {
				return "", err
			}
			alts[i] = r
		}
		return c.rule(strings.Join(alts, " | ")), nil
	}
	var types []string
	switch t := s.vals["type"].(type) {
	case nil:
		if _, ok := s.vals["properties"]; ok {
			types = []string{"object"}
		} else if _, ok := s.vals["items"]; ok {
			types = []string{"array"}
		} else {
			c.anyValue = true
			return "value", nil
		}
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			str, ok := x.(string)
			if !ok {
				return "", fmt.Errorf("grammar: schema %s: type must be a string or a list of strings", path)
			}
			types = append(types, str)
		}
	default:
		return "", fmt.Errorf("grammar: schema %s: type must be a string or a list of strings", path)
	}
	alts := make([]string, 0, len(types))
	for _, t := range types {
		r, err := c.compileType(s, t, path)
		if err != nil {
			return "", err
		}
		alts = append(alts, r)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return c.rule(strings.Join(alts, " | ")), nil
}

func (c *schemaCompiler) compileRef(ref any, path string) (string, error) {
	str, ok := ref.(string)
	if !ok {
		return "", fmt.Errorf("grammar: schema %s: $ref must be a string", path)
	}
	if name, ok := c.refs[str]; ok {
		return name, nil
	}
	var target any
	for _, pre := range []string{"#/$defs/", "#/definitions/"} {
		if name, ok := strings.CutPrefix(str, pre); ok {
			if root, ok := c.root.(*ordered); ok {
				if defs, ok := root.vals[strings.Trim(pre[2:], "/")].(*ordered); ok {
					target = defs.vals[name]
				}
			}
		}
	}
	if target == nil {
		return "", fmt.Errorf("grammar: schema %s: $ref %q does not name an entry of #/$defs or #/definitions", path, str)
	}
	// The rule is named before it is compiled, so that a recursive
	// reference finds it.
	c.n++
	name := "r" + strconv.Itoa(c.n)
	c.refs[str] = name
	body, err := c.compile(target, str)
	if err != nil {
		return "", err
	}
	c.rules = append(c.rules, name+" ::= "+body)
	return name, nil
}

func (c *schemaCompiler) intKeyword(s *ordered, k, path string) (int, bool, error) {
	v, ok := s.vals[k]
	if !ok {
		return 0, false, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false, fmt.Errorf("grammar: schema %s: %s must be a number", path, k)
	}
	i, err := strconv.Atoi(n.String())
	if err != nil || i < 0 || i > maxRepeat {
		return 0, false, fmt.Errorf("grammar: schema %s: %s must be an integer in [0, %d]", path, k, maxRepeat)
	}
	return i, true, nil
}

// only rejects the keywords of s that type t does not use.
func only(s *ordered, t, path string, allowed ...string) error {
	for _, k := range s.keys {
		if k == "type" || annotations[k] {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return fmt.Errorf("grammar: schema %s: keyword %q does not apply to type %q", path, k, t)
		}
	}
	return nil
}

func (c *schemaCompiler) compileType(s *ordered, t, path string) (string, error) {
	switch t {
	case "string":
		if err := only(s, t, path, "minLength", "maxLength"); err != nil {
			return "", err
		}
		lo, _, err := c.intKeyword(s, "minLength", path)
		if err != nil {
			return "", err
		}
		hi, hasHi, err := c.intKeyword(s, "maxLength", path)
		if err != nil {
			return "", err
		}
		switch {
		case hasHi && hi < lo:
			return "", fmt.Errorf("grammar: schema %s: maxLength %d is below minLength %d", path, hi, lo)
		case hasHi:
			return c.rule(fmt.Sprintf(`"\"" char{%d,%d} "\""`, lo, hi)), nil
		case lo > 0:
			return c.rule(fmt.Sprintf(`"\"" char{%d,} "\""`, lo)), nil
		}
		return "string", nil
	case "number", "integer", "boolean", "null":
		if err := only(s, t, path); err != nil {
			return "", err
		}
		return t, nil
	case "array":
		if err := only(s, t, path, "items", "minItems", "maxItems"); err != nil {
			return "", err
		}
		item := "value"
		if it, ok := s.vals["items"]; ok {
			r, err := c.compile(it, path+"/items")
			if err != nil {
				return "", err
			}
			item = r
		} else {
			c.anyValue = true
		}
		lo, _, err := c.intKeyword(s, "minItems", path)
		if err != nil {
			return "", err
		}
		hi, hasHi, err := c.intKeyword(s, "maxItems", path)
		if err != nil {
			return "", err
		}
		if hasHi && hi < lo {
			return "", fmt.Errorf("grammar: schema %s: maxItems %d is below minItems %d", path, hi, lo)
		}
		if hasHi && hi == 0 {
			return `"[" ws "]"`, nil
		}
		rest := `( "," ws ` + item + ` ws )`
		switch {
		case hasHi:
			rest += fmt.Sprintf("{%d,%d}", max(lo-1, 0), hi-1)
		case lo > 1:
			rest += fmt.Sprintf("{%d,}", lo-1)
		default:
			rest += "*"
		}
		body := item + " ws " + rest
		if lo == 0 {
			body = "( " + body + " )?"
		}
		return c.rule(`"[" ws ` + body + ` "]"`), nil
	case "object":
		if err := only(s, t, path, "properties", "required", "additionalProperties"); err != nil {
			return "", err
		}
		return c.compileProperties(s, path)
	}
	return "", fmt.Errorf("grammar: schema %s: unknown type %q", path, t)
}

func (c *schemaCompiler) compileProperties(s *ordered, path string) (string, error) {
	props, _ := s.vals["properties"].(*ordered)
	if _, ok := s.vals["properties"]; ok && props == nil {
		return "", fmt.Errorf("grammar: schema %s: properties must be an object", path)
	}
	required := map[string]bool{}
	if r, ok := s.vals["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return "", fmt.Errorf("grammar: schema %s: required must be an array of names", path)
		}
		for _, x := range list {
			name, ok := x.(string)
			if !ok {
				return "", fmt.Errorf("grammar: schema %s: required must be an array of names", path)
			}
			if props == nil || props.vals[name] == nil {
				return "", fmt.Errorf("grammar: schema %s: required property %q is not in properties", path, name)
			}
			required[name] = true
		}
	}
	if props == nil || len(props.keys) == 0 {
		// A free-form object, its values under additionalProperties.
		val := "value"
		switch ap := s.vals["additionalProperties"].(type) {
		case nil:
			c.anyValue = true
		case bool:
			if !ap {
				return `"{" ws "}"`, nil
			}
			c.anyValue = true
		default:
			r, err := c.compile(ap, path+"/additionalProperties")
			if err != nil {
				return "", err
			}
			val = r
		}
		kv := `string ws ":" ws ` + val + ` ws`
		return c.rule(`"{" ws ( ` + kv + ` ( "," ws ` + kv + ` )* )? "}"`), nil
	}
	if ap, ok := s.vals["additionalProperties"]; ok {
		if b, isBool := ap.(bool); !isBool || b {
			// Only the listed properties are written, which every such
			// schema accepts; a schema for the extra ones would never be
			// used, and saying so is better than dropping it unseen.
			if !isBool {
				return "", fmt.Errorf("grammar: schema %s: additionalProperties as a schema next to properties is not supported", path)
			}
		}
	}
	var req, opt []string
	for _, name := range props.keys {
		r, err := c.compile(props.vals[name], path+"/properties/"+name)
		if err != nil {
			return "", err
		}
		kb, _ := json.Marshal(name)
		kv := Literal(string(kb)) + ` ws ":" ws ` + r + " ws"
		if required[name] {
			req = append(req, kv)
		} else {
			opt = append(opt, kv)
		}
	}
	var body string
	if len(req) > 0 {
		body = strings.Join(req, ` "," ws `)
		for _, kv := range opt {
			body += ` ( "," ws ` + kv + ` )?`
		}
	} else {
		// Any non-empty subset of the optional properties, in order:
		// S_i ::= kv_i ( "," ws S_{i+1} )? | S_{i+1}, S_n ::= kv_n.
		next := ""
		for i := len(opt) - 1; i >= 0; i-- {
			if next == "" {
				next = c.rule(opt[i])
				continue
			}
			next = c.rule(opt[i] + ` ( "," ws ` + next + ` )? | ` + next)
		}
		body = "( " + next + " )?"
	}
	return c.rule(`"{" ws ` + body + ` "}"`), nil
}
