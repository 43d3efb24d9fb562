// Peak fp32 FLOP/s of this machine, for MFU.
#pragma once

// FLOP/s of `threads` threads (<= 0: OpenMP's default) issuing independent FMAs (~0.2 s).
double peak_flops_measure(int threads);
// fp32 lanes of the vectors the build uses (16 with AVX-512, else 8).
int peak_flops_vector_lanes(void);
// The clock /proc/cpuinfo reports, in MHz (0 if unknown); for the nominal formula.
double peak_flops_cpu_mhz(void);
