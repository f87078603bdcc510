package redlock

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
)

// packageDocs returns every doc comment of what the package in dir
// exports, by name, and the package's own doc comment.
func packageDocs(t *testing.T, dir string) (docs map[string]string, pkgDoc string) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs = map[string]string{}
	for _, p := range pkgs {
		files := make([]*ast.File, 0, len(p.Files))
		for _, f := range p.Files {
			files = append(files, f)
		}
		d, err := doc.NewFromFiles(fset, files, "example.com/"+p.Name)
		if err != nil {
			t.Fatal(err)
		}
		pkgDoc = d.Doc
		values := func(vs []*doc.Value) {
			for _, v := range vs {
				docs[strings.Join(v.Names, ",")] = v.Doc
			}
		}
		funcs := func(prefix string, fs []*doc.Func) {
			for _, f := range fs {
				docs[prefix+f.Name] = f.Doc
			}
		}
		values(d.Consts)
		values(d.Vars)
		funcs("", d.Funcs)
		for _, ty := range d.Types {
			docs[ty.Name] = ty.Doc
			values(ty.Consts)
			values(ty.Vars)
			funcs("", ty.Funcs)
			funcs(ty.Name+".", ty.Methods)
		}
	}
	return docs, pkgDoc
}

// The documentation of public names speaks of what a user sees, never of
// the repository's internal identifiers, and points only to sections of
// the package documentation that exist (issue 42, item 9).
func TestGodocIsSelfContained(t *testing.T) {
	internal := regexp.MustCompile(`\bwire\.|\b(ReadersKey|IntentKey|PermitKey|MarkerKey)\b`)
	section := regexp.MustCompile(`package documentation on (\w+)`)
	for _, dir := range []string{".", "admin", "observe", "driver"} {
		if _, err := os.Stat(dir); err != nil {
			t.Fatal(err)
		}
		docs, pkgDoc := packageDocs(t, dir)
		for name, text := range docs {
			if m := internal.FindString(text); m != "" {
				t.Errorf("%s: the doc of %s mentions the internal %q", dir, name, m)
			}
			for _, m := range section.FindAllStringSubmatch(text, -1) {
				if !regexp.MustCompile(`(?mi)^# .*\b` + m[1]).MatchString(pkgDoc) {
					t.Errorf("%s: the doc of %s points to a section %q that the package doc does not have", dir, name, m[1])
				}
			}
		}
	}
}

// AutoExtend says what a limit of 0 means in its first lines, and Fence
// gives its rule first and its conditions as a list.
func TestGodocRuleFirst(t *testing.T) {
	docs, _ := packageDocs(t, ".")
	auto := strings.Join(strings.SplitN(docs["Lock.AutoExtend"], "\n", 4)[:3], " ")
	if !strings.Contains(auto, "limit of 0") {
		t.Errorf("the first lines of AutoExtend's doc do not say what 0 means:\n%s", docs["Lock.AutoExtend"])
	}
	fence := docs["Lock.Fence"]
	first, _, _ := strings.Cut(fence, "\n\n")
	if strings.Count(first, "\n") > 4 || !strings.Contains(first, "greater than the fence") || !strings.Contains(fence, "\n  - ") {
		t.Errorf("Fence's doc: the rule is not first in a short paragraph, or the conditions are not a list:\n%s", fence)
	}
}
