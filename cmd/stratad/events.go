package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stratakv/strata/node"
)

// eventsFlag is --events tenant=PUB[,REPLAY] (repeatable): the tenant's
// namespaces publish the KV event stream on a PUB socket at PUB and a
// replay socket at REPLAY (host:port each, port 0 a free one; node/events.go).
type eventsFlag struct{ into *node.EventsConfig }

func (f eventsFlag) String() string {
	if f.into == nil {
		return ""
	}
	return strings.Join(f.Values(), " ")
}

func (f eventsFlag) Set(s string) error {
	tenant, addrs, ok := strings.Cut(s, "=")
	pub, replay, _ := strings.Cut(addrs, ",")
	if !ok || tenant == "" || pub == "" {
		return fmt.Errorf("%q: want tenant=PUB-ADDRESS[,REPLAY-ADDRESS]", s)
	}
	if f.into.Tenants == nil {
		f.into.Tenants = map[string]node.EventsListen{}
	}
	f.into.Tenants[tenant] = node.EventsListen{Pub: pub, Replay: replay}
	return nil
}

// Values lists the tenants' streams as the flag takes them.
func (f eventsFlag) Values() []string {
	var out []string
	for t, l := range f.into.Tenants {
		v := t + "=" + l.Pub
		if l.Replay != "" {
			v += "," + l.Replay
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
