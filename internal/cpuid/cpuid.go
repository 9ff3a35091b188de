// Package cpuid executes the x86 CPUID instruction, for the packages whose
// assembly needs a feature golang.org/x/sys/cpu does not report on its own
// (VPCLMULQDQ without AVX-512) or reports under conditions they do not
// share. It has no code outside amd64.
package cpuid
