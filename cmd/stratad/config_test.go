package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/node"
)

// exampleConfig is the documented example file.
const exampleConfig = "../../deploy/stratad.yaml"

// parse is parseFlags without the logger, for comparisons.
func parse(t *testing.T, args ...string) node.Config {
	t.Helper()
	cfg, err := parseFlags(args)
	if err != nil {
		t.Fatalf("parseFlags %q: %v", args, err)
	}
	cfg.Logger = nil
	return cfg
}

// printed is --print-config's output for args.
func printed(t *testing.T, args ...string) string {
	t.Helper()
	_, err := parseFlags(append(args, "--print-config"))
	pr, ok := err.(*printRequest)
	if !ok {
		t.Fatalf("parseFlags %q --print-config: %v, want a print request", args, err)
	}
	if _, err := parseFlags(pr.rest); err != nil {
		t.Fatalf("parseFlags %q (the rest of --print-config): %v", pr.rest, err)
	}
	return string(pr.text)
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// keyLine matches a key of a config file, set or commented out.
var keyLine = regexp.MustCompile(`(?m)^#? ?([a-z][a-z0-9-]*):`)

// TestConfigExample: deploy/stratad.yaml parses into the node config it
// documents, and names every flag stratad has (set or as a comment).
func TestConfigExample(t *testing.T) {
	cfg := parse(t, "--config", exampleConfig)
	want := []struct {
		name      string
		got, want any
	}{
		{"listen", cfg.Listen, "0.0.0.0:7070"},
		{"raw-listen", cfg.RawListen, "0.0.0.0:7071"},
		{"etcd", cfg.EtcdEndpoints, []string{"http://etcd-0.example:2379", "http://etcd-1.example:2379", "http://etcd-2.example:2379"}},
		{"tiers", cfg.Tiers, []string{"host", "ssd"}},
		{"host-bytes", cfg.HostBytes, int64(8 << 30)},
		{"ssd-bytes", cfg.SSDBytes, int64(200 << 30)},
		{"ssd-sync", cfg.SSDSync.String(), "batch"},
		{"lease-ttl", cfg.LeaseTTL, 10 * time.Second},
		{"drain-timeout", cfg.DrainTimeout, 20 * time.Second},
		{"gossip-profile", string(cfg.GossipProfile), "lan"},
	}
	for _, w := range want {
		if !reflect.DeepEqual(w.got, w.want) {
			t.Errorf("%s: %v, want %v", w.name, w.got, w.want)
		}
	}
	text, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range keyLine.FindAllStringSubmatch(string(text), -1) {
		documented[m[1]] = true
	}
	for _, m := range keyLine.FindAllStringSubmatch(printed(t), -1) {
		if !documented[m[1]] {
			t.Errorf("%s does not mention flag %s: add a line `# %s: <default>  # what it does` to it", exampleConfig, m[1], m[1])
		}
	}
}

// TestConfigOverride: the command line wins over the file, per flag; a
// list is a repeated flag or the comma-separated form.
func TestConfigOverride(t *testing.T) {
	tenants := writeFile(t, "tenants", "# tenants\n\nacme=s3cret\n  beta=other  \n")
	file := writeFile(t, "c.yaml", "listen: 127.0.0.1:7001\nhost-bytes: 2GiB\ntiers: [host, ssd]\nssd-bytes: 1GiB\n"+
		"tenant-token: [gamma=tok3]\ntenant-token-file: ["+tenants+"]\njoin: [a:1, b:2]\nadmin-token: fromfile\n")
	cfg := parse(t, "--config", file, "--listen", "127.0.0.1:7002")
	if cfg.Listen != "127.0.0.1:7002" || cfg.HostBytes != 2<<30 || !reflect.DeepEqual(cfg.Tiers, []string{"host", "ssd"}) ||
		!reflect.DeepEqual(cfg.Join, []string{"a:1", "b:2"}) || cfg.AdminToken != "fromfile" {
		t.Fatalf("file and flags: %+v", cfg)
	}
	if want := map[string]string{"s3cret": "acme", "other": "beta", "tok3": "gamma"}; !reflect.DeepEqual(cfg.TenantTokens, want) {
		t.Fatalf("tenant tokens %v, want %v", cfg.TenantTokens, want)
	}
	// A repeated flag on the command line replaces the file's list.
	cfg = parse(t, "--config", file, "--tenant-token", "delta=tok4", "--tenant-token-file", tenants)
	if want := map[string]string{"s3cret": "acme", "other": "beta", "tok4": "delta"}; !reflect.DeepEqual(cfg.TenantTokens, want) {
		t.Fatalf("tenant tokens with flags %v, want %v", cfg.TenantTokens, want)
	}
	// A token's file form on the command line overrides the file's token.
	admin := writeFile(t, "admin", " root-token\n")
	if cfg = parse(t, "--config", file, "--admin-token-file", admin); cfg.AdminToken != "root-token" {
		t.Fatalf("admin token %q, want root-token from --admin-token-file", cfg.AdminToken)
	}
	if cfg = parse(t); cfg.Listen != "127.0.0.1:7070" || cfg.HostBytes != 0 {
		t.Fatalf("no file: %+v", cfg)
	}
}

// TestConfigErrors: bad files are refused with the file, the line and
// what is wrong; a bad tenant file does not echo the line (it holds a
// token).
func TestConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"unknown key":       {"listen: x:1\nhost_bytes: 1GiB\n", `c.yaml:2: unknown key "host_bytes": not a stratad flag; did you mean host-bytes?`},
		"dashes":            {"--listen: x:1\n", "write it without dashes: listen"},
		"every bad key":     {"nope: 1\nlisten: x:1\nneither: 2\n", `c.yaml:3: unknown key "neither"`},
		"bad value":         {"host-bytes: lots\n", `c.yaml:1: host-bytes: invalid value "lots": size "lots": want a positive number`},
		"bad bool":          {"pprof: maybe\n", `c.yaml:1: pprof: invalid value "maybe"`},
		"no value":          {"listen:\n", "c.yaml:1: listen has no value"},
		"mapping":           {"listen:\n  host: x\n", "listen: want a value or a list of values, not a mapping"},
		"list of maps":      {"join:\n  - a: 1\n", "join: line 2: a list holds plain values only"},
		"twice":             {"listen: a:1\nlisten: b:2\n", "c.yaml:2: listen is given twice (first on line 1)"},
		"reserved":          {"config: other.yaml\n", "config cannot be set in a config file"},
		"not a mapping":     {"- listen\n", "c.yaml:1: want a mapping of flag names to values"},
		"syntax":            {"listen: [a\n", "config file"},
		"tenant file":       {"tenant-token-file: TENANTS\n", "tenants:2: want name=value"},
		"empty admin token": {"admin-token-file: EMPTY\n", "is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			tenants := writeFile(t, "tenants", "acme=ok\nsecret-without-tenant\n")
			empty := writeFile(t, "empty", "\n")
			text := strings.NewReplacer("TENANTS", tenants, "EMPTY", empty).Replace(tc.text)
			_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", text)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret-without-tenant") {
				t.Fatalf("the error repeats the tenant file's line: %v", err)
			}
		})
	}
	if _, err := parseFlags([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}); err == nil ||
		!strings.Contains(err.Error(), "reading the config file") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := parseFlags([]string{"--listen", "x:1", "stray"}); err == nil || !strings.Contains(err.Error(), `unexpected argument "stray"`) {
		t.Fatalf("stray argument: %v", err)
	}
	if _, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", "")}); err != nil {
		t.Fatalf("empty file: %v", err)
	}
}

// TestPrintConfigRoundTrip: --print-config reads back with --config into
// the same configuration and prints the same again; token values are not
// printed, their files are.
func TestPrintConfigRoundTrip(t *testing.T) {
	tenants := writeFile(t, "tenants", "acme=s3cret\n")
	args := []string{"--config", exampleConfig, "--host-bytes", "1536MiB", "--pprof", "--ssd-dir", "",
		"--tenant-token-file", tenants, "--admin-token", "hunter2", "--max-batch", "100", "--log-level", "debug"}
	text := printed(t, args...)
	for _, want := range []string{"host-bytes: 1536MiB\n", "pprof: true\n", "max-batch: \"100\"\n", "ssd-dir: \"\"\n",
		"tenant-token-file: [" + tenants + "]\n", "# admin-token: set, not printed", "# gpu-bytes: 0\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{"hunter2", "s3cret"} {
		if strings.Contains(text, secret) {
			t.Fatalf("--print-config prints a token:\n%s", text)
		}
	}
	file := writeFile(t, "printed.yaml", text)
	want, got := parse(t, args...), parse(t, "--config", file, "--admin-token", "hunter2")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back:\n%+v\nwant\n%+v", got, want)
	}
	if again := printed(t, "--config", file, "--admin-token", "hunter2"); again != text {
		t.Fatalf("printed twice differs:\n%s\nthen\n%s", text, again)
	}
	// The print checks what a start would: a bad ssd-sync fails it.
	_, err := parseFlags([]string{"--ssd-sync", "sometimes", "--print-config"})
	pr, ok := err.(*printRequest)
	if !ok {
		t.Fatalf("--print-config with a bad ssd-sync: %v", err)
	}
	if err := pr.print(os.Stdout); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("printing a config with a bad ssd-sync: %v", err)
	}
}

// TestParseReserve: --reserve-share and --max-reserve-ttl reach
// node.Config from the command line and the config file; unset, the share
// is the node's default; a share outside (0, 1] and a default reservation
// deadline past the longest are refused, a file's naming its line.
func TestParseReserve(t *testing.T) {
	if cfg := parse(t); cfg.ReserveShare != node.DefaultReserveShare || cfg.MaxReserveTTL != 0 {
		t.Errorf("unset: share %v, max reserve TTL %v; want %v and the node's default", cfg.ReserveShare, cfg.MaxReserveTTL, node.DefaultReserveShare)
	}
	if cfg := parse(t, "--reserve-share", "0.25", "--max-reserve-ttl", "2m"); cfg.ReserveShare != 0.25 || cfg.MaxReserveTTL != 2*time.Minute {
		t.Errorf("flags: share %v, max reserve TTL %v", cfg.ReserveShare, cfg.MaxReserveTTL)
	}
	file := writeFile(t, "c.yaml", "reserve-share: 1\nmax-reserve-ttl: 90s\n")
	if cfg := parse(t, "--config", file); cfg.ReserveShare != 1 || cfg.MaxReserveTTL != 90*time.Second {
		t.Errorf("file: share %v, max reserve TTL %v", cfg.ReserveShare, cfg.MaxReserveTTL)
	}
	for _, v := range []string{"0", "-0.5", "1.5", "NaN", "Inf", "half"} {
		if _, err := parseFlags([]string{"--reserve-share", v}); err == nil || !strings.Contains(err.Error(), "want a number in (0, 1]") {
			t.Errorf("--reserve-share %s: %v", v, err)
		}
	}
	bad := writeFile(t, "bad.yaml", "listen: 127.0.0.1:7001\nreserve-share: 2\n")
	if _, err := parseFlags([]string{"--config", bad}); err == nil || !strings.Contains(err.Error(), "bad.yaml:2: reserve-share") {
		t.Errorf("a file's share of 2: %v", err)
	}
	if _, err := parseFlags([]string{"--reserve-ttl", "10m", "--max-reserve-ttl", "1m"}); err == nil ||
		!strings.Contains(err.Error(), "--reserve-ttl 10m0s exceeds --max-reserve-ttl 1m0s") {
		t.Errorf("a default deadline past the longest: %v", err)
	}
}
