//go:build !purego

package cpuid

// Query executes CPUID with EAX = leaf and ECX = sub.
func Query(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
