// Numeric values of command-line flags, shared by the programs' option parsers: a value that is
// not a whole number (or a number) inside its range ends the program with one line naming the flag.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// flag: the long option's name without the dashes ("seq-len"); text: its value as given.
long flag_long(const char* flag, const char* text, long lo, long hi);
double flag_double(const char* flag, const char* text, double lo, double hi);

#ifdef __cplusplus
}
#endif
