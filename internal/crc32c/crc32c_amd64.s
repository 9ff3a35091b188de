//go:build !purego

#include "textflag.h"

// CRC-32C by carry-less multiplication (after the Intel white paper "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ Instruction"), run side
// by side with the CRC32 instruction.
//
// # Folding
//
// Bit-reflected arithmetic modulo P (0x82F63B78 reflected). A 128-bit lane X
// holding 16 message bytes (in memory order) stands for the polynomial
//
//	X(x) = L(x)·x^64 + H(x)
//
// where L is its low quadword (the first 8 bytes) and H its high quadword,
// each read with bit 0 as the highest power. To move X forward by N bits,
// that is to find a 128-bit Y with Y ≡ X·x^N (mod P), we use
//
//	Y = clmul(L, x^(N+31) mod P) XOR clmul(H, x^(N-33) mod P)
//
// A reflected carry-less product of two 64-bit values, read as a 128-bit
// reflected value, is x·A(x)·B(x); a 32-bit constant k stored in the low half
// of a quadword stands for k(x)·x^32. So the first product is
// x·L·x^32·x^(N+31) = L·x^(N+64) and the second x·H·x^32·x^(N-33) = H·x^N,
// as wanted. Each product is at most 95 bits, so it fits the lane. The
// constants are named k<bytes> for N = 8·bytes bits and laid out
// [x^(N+31) mod P, x^(N-33) mod P], so that VPCLMULQDQ $0x00 multiplies the
// low quadwords by the first and $0x11 the high quadwords by the second.
// TestFoldConstants recomputes every one of them from the polynomial.
//
// # Registers and CRC values
//
// A 32-bit CRC register value r XORed into the first four bytes of a region
// stands for r times x^(bits from there to the end), which is exactly how a
// register carried into that region acts. Hence:
//   - the initial value is XORed into the first four bytes of the input;
//   - a region whose CRC is taken from a zero register by the CRC32
//     instruction is accounted for by XORing that CRC into the first four
//     bytes that follow it;
//   - once everything is folded into one 128-bit value V, the CRC of the
//     input is the CRC of V's 16 bytes from a zero register.
//
// # Layout
//
// The input is cut into 768-byte periods. Each period is four 192-byte
// groups, and each group is 64 bytes for the CRC32 instruction followed by
// 128 bytes for two ZMM accumulators:
//
//	group g (g = 0..3), at offset 192·g in the period:
//	  +0   64 bytes   CRC32Q stream g, register R8+g, from zero
//	  +64  64 bytes   accumulator Z(2g)
//	  +128 64 bytes   accumulator Z(2g+1)
//
// Eight ZMM accumulators hold 32 lanes. Each iteration moves every lane
// forward by one period (k768) and XORs in the matching bytes of the next
// period, which is 16 carry-less multiplies for 512 bytes. Meanwhile four
// independent CRC32Q chains (the instruction has a latency of about three
// cycles) cover the other 256 bytes, and each chain's CRC is XORed into the
// first lane of the accumulator right after its stretch. The two kinds of
// work use different execution units, so they overlap almost fully.

// k768: move a lane forward one period (768 bytes, 6144 bits).
DATA k768<>+0x00(SB)/8, $0x8d96551c // x^6175 mod P
DATA k768<>+0x08(SB)/8, $0xd7a4825c // x^6111 mod P
GLOBL k768<>(SB), RODATA|NOPTR, $16

// k64: move Z(2g) forward 64 bytes onto Z(2g+1), merging each group's pair.
DATA k64<>+0x00(SB)/8, $0x740eef02 // x^543 mod P
DATA k64<>+0x08(SB)/8, $0x9e4addf8 // x^479 mod P
GLOBL k64<>(SB), RODATA|NOPTR, $16

// k576, k384, k192: move groups 0, 1 and 2 forward onto group 3, which lies
// 3, 2 and 1 groups (of 192 bytes) after them.
DATA k576<>+0x00(SB)/8, $0x52148f02 // x^4639 mod P
DATA k576<>+0x08(SB)/8, $0x271d9844 // x^4575 mod P
GLOBL k576<>(SB), RODATA|NOPTR, $16

DATA k384<>+0x00(SB)/8, $0x00ac29cf // x^3103 mod P
DATA k384<>+0x08(SB)/8, $0xd270f1a2 // x^3039 mod P
GLOBL k384<>(SB), RODATA|NOPTR, $16

DATA k192<>+0x00(SB)/8, $0xa87ab8a8 // x^1567 mod P
DATA k192<>+0x08(SB)/8, $0xab7aff2a // x^1503 mod P
GLOBL k192<>(SB), RODATA|NOPTR, $16

// klanes: one pair per 128-bit lane of the last accumulator. Lanes 0, 1 and
// 2 lie 48, 32 and 16 bytes before lane 3, and lane 3 stays where it is (its
// pair is zero, so its products vanish and it is added back as it is).
DATA klanes<>+0x00(SB)/8, $0x1c291d04 // lane 0, 48 bytes: x^415 mod P
DATA klanes<>+0x08(SB)/8, $0xddc0152b //                   x^351 mod P
DATA klanes<>+0x10(SB)/8, $0x3da6d0cb // lane 1, 32 bytes: x^287 mod P
DATA klanes<>+0x18(SB)/8, $0xba4fc28e //                   x^223 mod P
DATA klanes<>+0x20(SB)/8, $0xf20c0dfe // lane 2, 16 bytes: x^159 mod P
DATA klanes<>+0x28(SB)/8, $0x493c7d27 //                   x^95 mod P
DATA klanes<>+0x30(SB)/8, $0
DATA klanes<>+0x38(SB)/8, $0
GLOBL klanes<>(SB), RODATA|NOPTR, $64

// FOLD moves the four lanes of accumulator acc forward by the distance of
// the constant pair broadcast in k, using tmp, and XORs in the 64 bytes at
// src (memory or register): acc = acc.lo·k.lo ^ acc.hi·k.hi ^ src.
#define FOLD(k, acc, tmp, src) \
	VPCLMULQDQ $0x00, k, acc, tmp; \
	VPCLMULQDQ $0x11, k, acc, acc; \
	VPTERNLOGD $0x96, src, tmp, acc

// CRC4 advances the four CRC32Q chains by the quadword at offset off of
// their stretches (which start 192 bytes apart).
#define CRC4(off) \
	CRC32Q off(SI), R8; \
	CRC32Q (192+off)(SI), R9; \
	CRC32Q (384+off)(SI), R10; \
	CRC32Q (576+off)(SI), R11

// func updateZMM(crc uint32, p []byte) uint32
// Requires len(p) to be a positive multiple of 768.
TEXT ·updateZMM(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), R8 // chain 0 starts from the initial value
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	// The accumulators start at zero: folding zero is harmless, and the
	// first iteration then needs no special case.
	VBROADCASTI32X4 k768<>(SB), Z31
	VPXORQ          Z0, Z0, Z0
	VPXORQ          Z1, Z1, Z1
	VPXORQ          Z2, Z2, Z2
	VPXORQ          Z3, Z3, Z3
	VPXORQ          Z4, Z4, Z4
	VPXORQ          Z5, Z5, Z5
	VPXORQ          Z6, Z6, Z6
	VPXORQ          Z7, Z7, Z7

loop:
	XORL R9, R9
	XORL R10, R10
	XORL R11, R11

	// Move every lane forward one period onto the matching bytes of
	// this period and XOR them in, interleaved with the CRC32Q chains.
	FOLD(Z31, Z0, Z16, 64(SI))
	FOLD(Z31, Z1, Z17, 128(SI))
	CRC4(0)
	FOLD(Z31, Z2, Z18, 256(SI))
	FOLD(Z31, Z3, Z19, 320(SI))
	CRC4(8)
	FOLD(Z31, Z4, Z20, 448(SI))
	FOLD(Z31, Z5, Z21, 512(SI))
	CRC4(16)
	FOLD(Z31, Z6, Z22, 640(SI))
	FOLD(Z31, Z7, Z23, 704(SI))
	CRC4(24)
	CRC4(32)
	CRC4(40)
	CRC4(48)
	CRC4(56)

	// Each chain's CRC goes into the first four bytes after its stretch,
	// the start of Z(2g) (the VEX moves clear the rest of Z8-Z11).
	VMOVD  R8, X8
	VMOVD  R9, X9
	VMOVD  R10, X10
	VMOVD  R11, X11
	VPXORQ Z8, Z0, Z0
	VPXORQ Z9, Z2, Z2
	VPXORQ Z10, Z4, Z4
	VPXORQ Z11, Z6, Z6
	XORL   R8, R8

	ADDQ $768, SI
	SUBQ $768, CX
	JNZ  loop

	// Merge each group's pair: Z(2g) moves forward 64 bytes onto Z(2g+1).
	VBROADCASTI32X4 k64<>(SB), Z30
	FOLD(Z30, Z0, Z16, Z1)
	FOLD(Z30, Z2, Z17, Z3)
	FOLD(Z30, Z4, Z18, Z5)
	FOLD(Z30, Z6, Z19, Z7)

	// Merge the groups: Z0, Z2 and Z4 move forward 576, 384 and 192
	// bytes onto Z6. The six products are independent.
	VBROADCASTI32X4 k576<>(SB), Z29
	VBROADCASTI32X4 k384<>(SB), Z28
	VBROADCASTI32X4 k192<>(SB), Z27
	VPCLMULQDQ      $0x00, Z29, Z0, Z16
	VPCLMULQDQ      $0x11, Z29, Z0, Z17
	VPCLMULQDQ      $0x00, Z28, Z2, Z18
	VPCLMULQDQ      $0x11, Z28, Z2, Z19
	VPCLMULQDQ      $0x00, Z27, Z4, Z20
	VPCLMULQDQ      $0x11, Z27, Z4, Z21
	VPTERNLOGD      $0x96, Z16, Z17, Z6
	VPTERNLOGD      $0x96, Z18, Z19, Z20
	VPTERNLOGD      $0x96, Z20, Z21, Z6

	// Merge the four 128-bit lanes of Z6: lanes 0-2 move forward 48, 32
	// and 16 bytes onto lane 3 (klanes gives lane 3 a zero pair). Lane 3
	// itself is extracted into X4 (clearing the rest of Z4) and added back.
	VMOVDQU64     klanes<>(SB), Z26
	VPCLMULQDQ    $0x00, Z26, Z6, Z16
	VPCLMULQDQ    $0x11, Z26, Z6, Z17
	VEXTRACTI32X4 $3, Z6, X4
	VPTERNLOGD    $0x96, Z16, Z17, Z4

	// Lanes 0-2 of Z4 now sum to the 128-bit remainder; lane 3 is zero.
	VEXTRACTI32X4 $1, Z4, X5
	VEXTRACTI32X4 $2, Z4, X6
	VPXOR         X5, X4, X4
	VPXOR         X6, X4, X4

	// The CRC of the input is the CRC, from a zero register, of these
	// 16 bytes: run them through the CRC32 instruction, low quadword first.
	VMOVQ   X4, AX
	VPEXTRQ $1, X4, BX
	XORL    DX, DX
	CRC32Q  AX, DX
	CRC32Q  BX, DX

	VZEROUPPER
	MOVL DX, ret+32(FP)
	RET

// # The 256-bit kernel
//
// For CPUs with VPCLMULQDQ and AVX2 but not AVX-512 (updateYMM): the same
// folding rule on 256-bit registers, beside four CRC32Q chains as above.
// The input is cut into 512-byte periods of four 128-byte groups:
//
//	group g (g = 0..3), at offset 128·g in the period:
//	  +0   64 bytes   CRC32Q stream g, register R8+g, from zero
//	  +64  32 bytes   accumulator Y(2g)
//	  +96  32 bytes   accumulator Y(2g+1)
//
// The accumulators start at zero; each iteration moves every lane forward
// one period (k512), XORs in the matching bytes, and XORs each chain's CRC
// into the first four bytes after its stretch (the start of Y(2g)). At
// the end every lane moves forward onto the last one (kymm), and the CRC
// of the input is the CRC of that lane's 16 bytes from a zero register.

// k512: move a lane forward one period of the 256-bit kernel.
DATA k512<>+0x00(SB)/8, $0xbd6f81f8 // x^4127 mod P
DATA k512<>+0x08(SB)/8, $0xdd7e3b0c // x^4063 mod P
GLOBL k512<>(SB), RODATA|NOPTR, $16

// kymm: the lanes of the last period, Y(i)'s two at 32·i in the table,
// move forward onto the last lane, at byte 496 of the period (Y7's high
// lane, whose pair is zero).
DATA kymm<>+0x00(SB)/8, $0xe0e9f351 // 432 bytes: x^3487 mod P
DATA kymm<>+0x08(SB)/8, $0x65863b64 // x^3423 mod P
DATA kymm<>+0x10(SB)/8, $0x96638b34 // 416 bytes: x^3359 mod P
DATA kymm<>+0x18(SB)/8, $0x2b3cac5d // x^3295 mod P
DATA kymm<>+0x20(SB)/8, $0xe9adf796 // 400 bytes: x^3231 mod P
DATA kymm<>+0x28(SB)/8, $0xc619809d // x^3167 mod P
DATA kymm<>+0x30(SB)/8, $0x00ac29cf // 384 bytes: x^3103 mod P
DATA kymm<>+0x38(SB)/8, $0xd270f1a2 // x^3039 mod P
DATA kymm<>+0x40(SB)/8, $0x18b0d4ff // 304 bytes: x^2463 mod P
DATA kymm<>+0x48(SB)/8, $0x78d9ccb7 // x^2399 mod P
DATA kymm<>+0x50(SB)/8, $0x6051d5a2 // 288 bytes: x^2335 mod P
DATA kymm<>+0x58(SB)/8, $0xb6dd949b // x^2271 mod P
DATA kymm<>+0x60(SB)/8, $0xf37c5aee // 272 bytes: x^2207 mod P
DATA kymm<>+0x68(SB)/8, $0x18b33a4e // x^2143 mod P
DATA kymm<>+0x70(SB)/8, $0xdcb17aa4 // 256 bytes: x^2079 mod P
DATA kymm<>+0x78(SB)/8, $0xb9e02b86 // x^2015 mod P
DATA kymm<>+0x80(SB)/8, $0xf1d0f55e // 176 bytes: x^1439 mod P
DATA kymm<>+0x88(SB)/8, $0xdaece73e // x^1375 mod P
DATA kymm<>+0x90(SB)/8, $0x1b3d8f29 // 160 bytes: x^1311 mod P
DATA kymm<>+0x98(SB)/8, $0x878a92a7 // x^1247 mod P
DATA kymm<>+0xa0(SB)/8, $0x7e908048 // 144 bytes: x^1183 mod P
DATA kymm<>+0xa8(SB)/8, $0xc96cfdc0 // x^1119 mod P
DATA kymm<>+0xb0(SB)/8, $0x6992cea2 // 128 bytes: x^1055 mod P
DATA kymm<>+0xb8(SB)/8, $0x0d3b6092 // x^991 mod P
DATA kymm<>+0xc0(SB)/8, $0x1c291d04 // 48 bytes: x^415 mod P
DATA kymm<>+0xc8(SB)/8, $0xddc0152b // x^351 mod P
DATA kymm<>+0xd0(SB)/8, $0x3da6d0cb // 32 bytes: x^287 mod P
DATA kymm<>+0xd8(SB)/8, $0xba4fc28e // x^223 mod P
DATA kymm<>+0xe0(SB)/8, $0xf20c0dfe // 16 bytes: x^159 mod P
DATA kymm<>+0xe8(SB)/8, $0x493c7d27 // x^95 mod P
DATA kymm<>+0xf0(SB)/8, $0
DATA kymm<>+0xf8(SB)/8, $0
GLOBL kymm<>(SB), RODATA|NOPTR, $256

// FOLDY is FOLD on 256-bit registers, without VPTERNLOGD (AVX-512):
// acc = acc.lo·k.lo ^ acc.hi·k.hi ^ src.
#define FOLDY(k, acc, tmp, src) \
	VPCLMULQDQ $0x00, k, acc, tmp; \
	VPCLMULQDQ $0x11, k, acc, acc; \
	VPXOR      src, tmp, tmp; \
	VPXOR      tmp, acc, acc

// ENDY moves both lanes of acc onto the last lane of the period with the
// pairs at off in kymm, XORing the products into sum, using t1 and t2.
#define ENDY(off, acc, t1, t2, sum) \
	VPCLMULQDQ $0x00, kymm<>+off(SB), acc, t1; \
	VPCLMULQDQ $0x11, kymm<>+off(SB), acc, t2; \
	VPXOR      t1, sum, sum; \
	VPXOR      t2, sum, sum

// CRC4Y advances the four CRC32Q chains of the 256-bit kernel by the
// quadword at offset off of their stretches (which start 128 bytes apart).
#define CRC4Y(off) \
	CRC32Q off(SI), R8; \
	CRC32Q (128+off)(SI), R9; \
	CRC32Q (256+off)(SI), R10; \
	CRC32Q (384+off)(SI), R11

// func updateYMM(crc uint32, p []byte) uint32
// Requires len(p) to be a positive multiple of 512.
TEXT ·updateYMM(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), R8 // chain 0 starts from the initial value
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VBROADCASTI128 k512<>(SB), Y15
	VPXOR          Y0, Y0, Y0
	VPXOR          Y1, Y1, Y1
	VPXOR          Y2, Y2, Y2
	VPXOR          Y3, Y3, Y3
	VPXOR          Y4, Y4, Y4
	VPXOR          Y5, Y5, Y5
	VPXOR          Y6, Y6, Y6
	VPXOR          Y7, Y7, Y7

loopy:
	XORL R9, R9
	XORL R10, R10
	XORL R11, R11

	FOLDY(Y15, Y0, Y8, 64(SI))
	FOLDY(Y15, Y1, Y9, 96(SI))
	CRC4Y(0)
	CRC4Y(8)
	FOLDY(Y15, Y2, Y10, 192(SI))
	FOLDY(Y15, Y3, Y11, 224(SI))
	CRC4Y(16)
	CRC4Y(24)
	FOLDY(Y15, Y4, Y12, 320(SI))
	FOLDY(Y15, Y5, Y13, 352(SI))
	CRC4Y(32)
	CRC4Y(40)
	FOLDY(Y15, Y6, Y14, 448(SI))
	FOLDY(Y15, Y7, Y8, 480(SI))
	CRC4Y(48)
	CRC4Y(56)

	// Each chain's CRC goes into the first four bytes after its stretch,
	// the start of Y(2g) (the VEX moves clear the rest of Y8-Y11).
	VMOVD R8, X8
	VMOVD R9, X9
	VMOVD R10, X10
	VMOVD R11, X11
	VPXOR Y8, Y0, Y0
	VPXOR Y9, Y2, Y2
	VPXOR Y10, Y4, Y4
	VPXOR Y11, Y6, Y6
	XORL  R8, R8

	ADDQ $512, SI
	SUBQ $512, CX
	JNZ  loopy

	// Every lane onto the last (the high lane of Y7), summed in Y14.
	VPXOR Y14, Y14, Y14
	ENDY(0x00, Y0, Y8, Y9, Y14)
	ENDY(0x20, Y1, Y10, Y11, Y14)
	ENDY(0x40, Y2, Y12, Y13, Y14)
	ENDY(0x60, Y3, Y8, Y9, Y14)
	ENDY(0x80, Y4, Y10, Y11, Y14)
	ENDY(0xa0, Y5, Y12, Y13, Y14)
	ENDY(0xc0, Y6, Y8, Y9, Y14)
	ENDY(0xe0, Y7, Y10, Y11, Y14)

	// Both lanes of Y14 and the last lane itself now stand at byte 496:
	// their XOR is the 128-bit remainder.
	VEXTRACTI128 $1, Y14, X8
	VEXTRACTI128 $1, Y7, X9
	VPXOR        X8, X14, X14
	VPXOR        X9, X14, X14

	VMOVQ   X14, AX
	VPEXTRQ $1, X14, BX
	XORL    DX, DX
	CRC32Q  AX, DX
	CRC32Q  BX, DX

	VZEROUPPER
	MOVL DX, ret+32(FP)
	RET
