package store

import "errors"

var (
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("store closed")
	// ErrNamespaceNotFound is returned when a request names a namespace that
	// was never added to this store.
	ErrNamespaceNotFound = errors.New("namespace not found")
	// ErrBadSize is returned by Reserve for a page whose size is not the
	// namespace's page size.
	ErrBadSize = errors.New("page size does not match the namespace")
	// ErrNoSpace is returned by Reserve when no tier has room and nothing
	// can be evicted (everything is leased or being read).
	ErrNoSpace = errors.New("no space for the page")
	// ErrUnknownWrite is returned by Write for a write id this store never
	// issued, or one it has forgotten.
	ErrUnknownWrite = errors.New("unknown write id")
	// ErrWriteExpired is returned by Write for a reservation whose deadline
	// passed; its space has been returned.
	ErrWriteExpired = errors.New("reservation expired")
	// ErrWriteClosed is returned by Write for a reservation that was
	// already committed or aborted.
	ErrWriteClosed = errors.New("reservation already committed or aborted")
	// ErrWriteOutOfRange is returned by Write for bytes beyond the reserved
	// size, or an offset that leaves a gap after what was written.
	ErrWriteOutOfRange = errors.New("write outside the reservation")
	// ErrLeaseExpired is returned when a request names a lease whose TTL
	// passed: the pages it covered are no longer protected.
	ErrLeaseExpired = errors.New("lease expired")
	// ErrLeaseNotFound is returned when a request names a lease that was
	// released, never granted, or belongs to another namespace.
	ErrLeaseNotFound = errors.New("lease not found")
	// ErrLeaseLimit is returned by Lookup when the namespace's tenant
	// already holds Config.MaxLeasesPerTenant leases.
	ErrLeaseLimit = errors.New("too many active leases for the tenant")
	// ErrNotPresent is returned by Pin when a page it names is not
	// published: nothing is pinned.
	ErrNotPresent = errors.New("page not published")
	// ErrNotAdmitted is a Reserve's answer (Reservation.Err) for a page the
	// node would have to drop pages for, when its eviction policy values it
	// below the cutoff or below the page it would displace, and for the
	// later pages of the same sequence in that Reserve. The page is not
	// stored; a cluster client may put it on its second placement candidate.
	ErrNotAdmitted = errors.New("page not admitted: the node holds more valuable pages")
	// ErrQuota is a Reserve's answer (Reservation.Err) for a page past its
	// tenant's quota (SetQuotas), and Lookup's error for a lease past it.
	ErrQuota = errors.New("over the tenant's quota (QUOTA)")
)
