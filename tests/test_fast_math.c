// model/fast_math.h against libm, built with UndefinedBehaviorSanitizer (every report fatal): the
// exponent arithmetic of fast_exp once shifted a negative value left, undefined behaviour on
// every call with x < 0. Exits non-zero on an error above the documented bounds or any UB report.
#include <math.h>
#include <stdio.h>

#include "model/fast_math.h"

int main(void) {
    double worst_exp = 0, worst_tanh = 0;
    // Beyond the clamp [-87, 88] too: fast_exp returns exp of the clamped value there.
    for (int i = -10000; i <= 10000; i++) {
        const float x = (float)i * 0.01f;
        const float c = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
        const double e = fabs((double)fast_exp(x) / exp((double)c) - 1.0);
        worst_exp = e > worst_exp ? e : worst_exp;
        const double t = fabs((double)fast_tanh(x) - tanh((double)x));
        worst_tanh = t > worst_tanh ? t : worst_tanh;
    }
    // The header's bounds: exp ~1.3e-7 relative from the polynomial plus fp32 rounding; tanh ~1e-7
    // absolute.
    const int ok = worst_exp < 4e-7 && worst_tanh < 4e-7;
    printf("%s fast_exp worst relative error %.2e (bound 4e-7), fast_tanh worst absolute error "
           "%.2e (bound 4e-7), x in [-100, 100]\n", ok ? "ok  " : "FAIL", worst_exp, worst_tanh);
    return ok ? 0 : 1;
}
