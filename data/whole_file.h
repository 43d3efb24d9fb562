// A whole small input file read into memory, with the checks every reader needs (a regular
// file, a size limit) and one-line errors naming the file.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Reads `path` into *data (malloc'd, caller frees; a NUL byte follows the last one) and sets
// *len. Refuses anything but a regular file, and files above max_bytes (`what` names the
// content in the message: "vocabulary file"). Returns 0, or -1 with err set and nothing
// allocated.
int whole_file_read(const char* path, size_t max_bytes, const char* what, uint8_t** data,
                    size_t* len, char* err, size_t errlen);
