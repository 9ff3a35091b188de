package node

import "testing"

func TestAdvertised(t *testing.T) {
	for _, c := range []struct{ listen, advertise, gossip, want string }{
		{"127.0.0.1:7070", "", "127.0.0.1:0", "127.0.0.1:7070"},
		{"[::]:7070", "", "127.0.0.2:7946", "127.0.0.2:7070"},
		{"0.0.0.0:7070", "", "127.0.0.3:0", "127.0.0.3:7070"},
		{"0.0.0.0:7070", "store-1.example:7070", "0.0.0.0:0", "store-1.example:7070"},
		{"[::1]:7070", "", "", "[::1]:7070"},
	} {
		if got := advertised(c.listen, c.advertise, c.gossip); got != c.want {
			t.Errorf("advertised(%q, %q, %q) = %q, want %q", c.listen, c.advertise, c.gossip, got, c.want)
		}
	}
	// Nothing specified anywhere: the hostname, never the unspecified host.
	if got := advertised("[::]:7070", "", "0.0.0.0:0"); got == "[::]:7070" {
		t.Errorf("advertised an unspecified host: %q", got)
	}
}
