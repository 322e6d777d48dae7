package glmrun_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeExample keeps the README's library example a program that
// compiles: its main must be Example_chat's body, comments included, and
// it must import exactly the packages that body uses.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var prog string
	for _, block := range strings.Split(string(readme), "```go\n")[1:] {
		if code, _, ok := strings.Cut(block, "```"); ok && strings.Contains(code, "func main()") {
			prog = code
		}
	}
	if prog == "" {
		t.Fatal("README.md has no ```go block with a func main")
	}
	fset := token.NewFileSet()
	rf, err := parser.ParseFile(fset, "README.md", prog, parser.ParseComments)
	if err != nil {
		t.Fatalf("the README's example does not parse: %v", err)
	}
	ef, err := parser.ParseFile(fset, "example_test.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	main, example := findFunc(rf, "main"), findFunc(ef, "Example_chat")
	if rf.Name.Name != "main" || main == nil || example == nil {
		t.Fatalf("want package main with func main in the README and Example_chat in example_test.go")
	}
	if got, want := source(t, fset, rf, main.Body), source(t, fset, ef, example.Body); got != want {
		t.Errorf("the README's main differs from Example_chat: copy the example's body into the README.\nREADME:\n%s\nexample:\n%s", got, want)
	}
	// The packages the body names, by the example file's imports.
	byName := map[string]string{}
	for _, im := range ef.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		byName[path.Base(p)] = p
	}
	var want []string
	ast.Inspect(example.Body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && byName[id.Name] != "" && !slices.Contains(want, byName[id.Name]) {
				want = append(want, byName[id.Name])
			}
		}
		return true
	})
	var got []string
	for _, im := range rf.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		got = append(got, p)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the README's example imports %v, its body uses %v", got, want)
	}
}

func findFunc(f *ast.File, name string) *ast.FuncDecl {
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == name && fn.Recv == nil {
			return fn
		}
	}
	return nil
}

// source prints n, a node of f, with its comments.
func source(t *testing.T, fset *token.FileSet, f *ast.File, n ast.Node) string {
	t.Helper()
	var b bytes.Buffer
	if err := printer.Fprint(&b, fset, &printer.CommentedNode{Node: n, Comments: f.Comments}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
