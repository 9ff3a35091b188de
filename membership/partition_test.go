package membership

import "testing"

func TestPartitionAddresses(t *testing.T) {
	var p Partition // the zero value blocks nothing
	if p.blocks("127.0.0.1:7946") {
		t.Fatal("zero Partition blocks")
	}
	p.Block("127.0.0.1:7946", "[::1]:80", "not an address")
	for addr, want := range map[string]bool{
		"127.0.0.1:7946":          true,
		"[::ffff:127.0.0.1]:7946": true, // the same address, IPv4-mapped
		"127.0.0.1:7947":          false,
		"[::1]:80":                true,
		"[0:0:0:0:0:0:0:1]:80":    true,
		"not an address":          true,
		"127.0.0.2:7946":          false,
	} {
		if got := p.blocks(addr); got != want {
			t.Errorf("blocks(%q) = %v, want %v", addr, got, want)
		}
	}
	p.Heal()
	if p.blocks("127.0.0.1:7946") {
		t.Error("blocks after Heal")
	}
}
