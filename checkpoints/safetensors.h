// Hugging Face's safetensors file, what `from_pretrained` reads: an 8-byte little-endian header
// length N, N bytes of JSON naming each tensor's dtype, shape and byte range
//   {"NAME": {"dtype": "F32", "shape": [R, C], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"format": "pt"}}
// padded with spaces to a multiple of 8, then the tensors' little-endian bytes back to back in the
// header's order, with no gaps (offsets count from the first byte after the header).
#pragma once
#include <stddef.h>

typedef enum { SAFETENSORS_F32, SAFETENSORS_BF16 } SafetensorsDtype;

// One tensor of 1 or 2 dimensions gathered from fp32 memory: element (i, j) of a (rows, cols)
// tensor is src[i * row_stride + j * col_stride], so a transpose is a swap of the two strides;
// a 1-D tensor of n elements is rows = 1, cols = n.
typedef struct {
    const char* name;
    int ndim;   // 1 or 2: what the header says
    size_t rows, cols;
    const float* src;
    size_t row_stride, col_stride;
} SafetensorsTensor;

// "F32" or "BF16".
const char* safetensors_dtype_name(SafetensorsDtype dtype);
// Writes the n tensors to path atomically (temporary file, fsync, rename), every one stored as
// dtype (bf16 rounded to nearest even). Returns 0, or -1 with a one-line message in err.
int safetensors_write(const char* path, const SafetensorsTensor* t, int n, SafetensorsDtype dtype,
                      char* err, size_t errlen);

// ---- reading ----
enum { SAFETENSORS_MAX_DIMS = 8 };

typedef struct {
    char name[256];
    char dtype[16];                      // as the file names it: "F32", "BF16", "F16", "I64", ...
    int ndim;
    unsigned long long shape[SAFETENSORS_MAX_DIMS];
    unsigned long long begin, end;       // bytes, from the first byte after the header
} SafetensorsEntry;

typedef struct {
    char path[4096];
    unsigned long long data_start;       // 8 + the header's length
    int n;
    SafetensorsEntry* entries;           // in the header's order
} SafetensorsFile;

// Reads and checks the header: an 8-byte length no larger than the file (and 100 MiB), a JSON
// object of entries {"dtype", "shape", "data_offsets"} and an optional "__metadata__", known
// dtypes, byte ranges that match each shape and tile the data exactly, no name twice. Returns 0,
// or -1 with "PATH: ..." in err and nothing allocated.
int safetensors_open(const char* path, SafetensorsFile* f, char* err, size_t errlen);
// The entry named name, or NULL.
const SafetensorsEntry* safetensors_find(const SafetensorsFile* f, const char* name);
unsigned long long safetensors_numel(const SafetensorsEntry* e);
// Entry e's values widened to fp32 (from F32, BF16 or F16) into out (safetensors_numel floats).
int safetensors_read_f32(const SafetensorsFile* f, const SafetensorsEntry* e, float* out,
                         char* err, size_t errlen);
void safetensors_close(SafetensorsFile* f);
