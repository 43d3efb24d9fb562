#include "comm/flag_values.h"

#include <errno.h>
#include <stdlib.h>

#include "comm/fail.h"

long flag_long(const char* flag, const char* text, long lo, long hi) {
    char* end;
    errno = 0;
    const long x = strtol(text, &end, 10);
    if (errno || end == text || *end || x < lo || x > hi)
        fail_msg("--%s: expected an integer in [%ld, %ld], found '%s'", flag, lo, hi, text);
    return x;
}

double flag_double(const char* flag, const char* text, double lo, double hi) {
    char* end;
    errno = 0;
    const double x = strtod(text, &end);
    if (errno || end == text || *end || !(x >= lo && x <= hi))
        fail_msg("--%s: expected a number in [%g, %g], found '%s'", flag, lo, hi, text);
    return x;
}
