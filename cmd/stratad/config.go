package main

// The config file (--config FILE) and --print-config.
//
// A config file is a YAML mapping from flag names (without dashes) to what
// the flag takes on the command line, written as YAML scalars:
//
//	listen: 0.0.0.0:7070
//	host-bytes: 8GiB
//	lease-ttl: 10s
//	pprof: true
//
// A list is the flag repeated for flags that repeat (tenant-token,
// tenant-token-file) and the comma-separated form for the others (tiers,
// etcd, join). Every flag, present and future, is covered the same way: a
// key is applied with flag.FlagSet.Set, so it is parsed and checked exactly
// as the flag is. A flag given on the command line wins over the file: the
// file sets only the flags the command line left alone (a flag X and its
// file form X-file count as one). Unknown keys, nested mappings, empty
// values and keys given twice are errors that name the file and the line.
//
// --print-config prints the effective configuration (every flag set on the
// command line or in the file, then the others at their defaults as
// comments) in the same format, so that it can be read back with --config.
// Token values are not printed: the *-file form of a token flag keeps them
// out of files that get copied around and out of command lines.

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// repeated is a flag.Value that may be given more than once; Values lists
// what it was given, in order.
type repeated interface {
	flag.Value
	Values() []string
}

// printRequest is what parseConfig returns for --print-config: the
// configuration to print once the rest of the flags have been checked.
type printRequest struct {
	text []byte   // the effective configuration, YAML
	rest []string // the command line without --print-config
}

func (p *printRequest) Error() string { return "--print-config" }

// print checks the configuration as a start would (parseFlags without
// --print-config), then writes it to w.
func (p *printRequest) print(w *os.File) error {
	if _, err := parseFlags(p.rest); err != nil {
		return err
	}
	_, err := w.Write(p.text)
	return err
}

// parseConfig parses args into fs and applies the --config file, if any,
// to the flags args left unset. With --print-config it returns a
// *printRequest.
func parseConfig(fs *flag.FlagSet, args []string) error {
	path := fs.String("config", "", "YAML config file: flag names as keys (see deploy/stratad.yaml); command-line flags override it")
	printIt := fs.Bool("print-config", false, "print the effective configuration (flags and --config file) as YAML and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: stratad takes flags only (stratad -h lists them)", fs.Arg(0))
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	if *path != "" {
		data, err := os.ReadFile(*path)
		if err != nil {
			return fmt.Errorf("reading the config file: %w", err)
		}
		skip := func(name string) bool {
			base := strings.TrimSuffix(name, "-file")
			return onCommandLine[base] || onCommandLine[base+"-file"]
		}
		if err := applyConfig(fs, data, *path, skip); err != nil {
			return err
		}
	}
	if !*printIt {
		return nil
	}
	text, err := renderConfig(fs)
	if err != nil {
		return err
	}
	rest := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		return strings.HasPrefix(a, "-") && name == "print-config"
	})
	return &printRequest{text: text, rest: rest}
}

// reserved are the flags a config file cannot set.
var reserved = []string{"config", "print-config"}

// applyConfig sets the flags of fs that the YAML document data names,
// except those skip reports; file names the document in errors. It reports
// every bad key, not only the first.
func applyConfig(fs *flag.FlagSet, data []byte, file string, skip func(string) bool) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config file %s: %w", file, err)
	}
	if doc.Kind == 0 {
		return nil // empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s:%d: want a mapping of flag names to values (e.g. listen: 0.0.0.0:7070)", file, root.Line)
	}
	var errs []error
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if err := applyKey(fs, k, v, seen, skip); err != nil {
			errs = append(errs, fmt.Errorf("config file %s:%d: %w", file, k.Line, err))
		}
	}
	return errors.Join(errs...)
}

// applyKey applies one key of a config file.
func applyKey(fs *flag.FlagSet, k, v *yaml.Node, seen map[string]int, skip func(string) bool) error {
	if k.Kind != yaml.ScalarNode {
		return errors.New("a key must be a flag name")
	}
	name := k.Value
	if line, ok := seen[name]; ok {
		return fmt.Errorf("%s is given twice (first on line %d)", name, line)
	}
	seen[name] = k.Line
	f := fs.Lookup(name)
	switch {
	case slices.Contains(reserved, name):
		return fmt.Errorf("%s cannot be set in a config file", name)
	case f == nil:
		return fmt.Errorf("unknown key %q: not a stratad flag%s (stratad -h lists them)", name, suggest(fs, name))
	case skip(name):
		return nil
	}
	values, err := scalars(name, v)
	if err != nil {
		return err
	}
	if _, ok := f.Value.(repeated); !ok && len(values) > 0 {
		values = []string{strings.Join(values, ",")}
	}
	for _, s := range values {
		if err := fs.Set(name, s); err != nil {
			return fmt.Errorf("%s: invalid value %q: %w", name, s, err)
		}
	}
	return nil
}

// scalars is a key's value: one scalar or a list of them.
func scalars(name string, v *yaml.Node) ([]string, error) {
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return nil, fmt.Errorf("%s has no value", name)
	case v.Kind == yaml.ScalarNode:
		return []string{v.Value}, nil
	case v.Kind == yaml.SequenceNode:
		out := make([]string, 0, len(v.Content))
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				return nil, fmt.Errorf("%s: line %d: a list holds plain values only", name, e.Line)
			}
			out = append(out, e.Value)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want a value or a list of values, not a mapping", name)
}

// suggest names the flag a mistyped key probably meant.
func suggest(fs *flag.FlagSet, name string) string {
	if alt := strings.ReplaceAll(name, "_", "-"); alt != name && fs.Lookup(alt) != nil {
		return fmt.Sprintf("; did you mean %s?", alt)
	}
	if alt := strings.TrimLeft(name, "-"); alt != name && fs.Lookup(alt) != nil {
		return fmt.Sprintf("; write it without dashes: %s", alt)
	}
	return ""
}

// secret reports whether a flag's value must not be printed.
func secret(name string) bool { return strings.HasSuffix(name, "-token") }

// renderConfig writes the effective configuration of fs as YAML: the flags
// that were set, then every other flag at its default, commented out.
func renderConfig(fs *flag.FlagSet) ([]byte, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var b strings.Builder
	b.WriteString("# stratad's effective configuration (stratad --print-config); read it back with --config.\n" +
		"# Flags left at their defaults are listed as comments.\n")
	root := &yaml.Node{Kind: yaml.MappingNode}
	var defaults []string
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		switch {
		case slices.Contains(reserved, f.Name):
		case !set[f.Name]:
			defaults = append(defaults, "# "+f.Name+": "+defaultOf(f))
		case secret(f.Name):
			defaults = append(defaults, "# "+f.Name+": set, not printed (give it with --"+f.Name+"-file)")
		default:
			root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: f.Name}, valueNode(f))
		}
	})
	if len(root.Content) > 0 {
		var out []byte
		if out, err = yaml.Marshal(root); err != nil {
			return nil, err
		}
		b.Write(out)
	}
	for _, d := range defaults {
		b.WriteString(d + "\n")
	}
	return []byte(b.String()), nil
}

// valueNode is a set flag's value as YAML.
func valueNode(f *flag.Flag) *yaml.Node {
	if r, ok := f.Value.(repeated); ok {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, s := range r.Values() {
			seq.Content = append(seq.Content, stringNode(s))
		}
		return seq
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: f.Value.String()}
	}
	return stringNode(f.Value.String())
}

// stringNode is s as a YAML string, quoted where YAML would read it as
// something else.
func stringNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// defaultOf is an unset flag's default as the comment shows it.
func defaultOf(f *flag.Flag) string {
	switch _, ok := f.Value.(repeated); {
	case ok:
		return "[]"
	case f.DefValue == "":
		return `""`
	}
	return f.DefValue
}
