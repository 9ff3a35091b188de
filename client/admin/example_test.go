package admin_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/stratakv/strata/client/admin"
)

// Dial a cluster through any of its nodes and list its namespaces, summed
// over the members, saying which members did not answer.
func Example() {
	ctx := context.Background()
	c, err := admin.Dial(ctx, []string{"10.0.0.1:7070", "10.0.0.2:7070"},
		admin.Options{Token: "admin-token", Timeout: 3 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	nss, failed, err := c.Namespaces(ctx, "")
	if err != nil {
		log.Fatal(err) // every member failed
	}
	for _, ne := range failed {
		log.Printf("left out: %v (unreachable: %v)", ne, admin.Unreachable(ne))
	}
	for _, ns := range nss {
		d := ns.Info.GetDescriptor_()
		fmt.Printf("%x %s/%s: %d pages on %v\n", ns.Info.GetId(), d.GetTenant(), d.GetModel(), ns.Info.GetPages(), ns.Holders())
	}
}
