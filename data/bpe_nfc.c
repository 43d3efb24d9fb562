// NFC by ICU, with the quick check done here over a table of ICU's properties.
#include "data/bpe_nfc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "comm/fail.h"
#include "data/bpe_tokens.h"

// A table value: the character's NFC_Quick_Check is No or Maybe (canonical combining classes
// are 0..240, so this is none of them).
#define NOT_YES 0xFF
#define BMP 0x10000

struct BpeNfc {
    const UNormalizer2* normalizer;
    uint8_t quick[BMP];     // BMP code point -> its combining class when NFC_QC=Yes, else NOT_YES
    UChar *utf16, *normal;  // a run in UTF-16, and its NFC
    size_t utf16_cap, normal_cap;  // in code units
    uint8_t* out;           // the normalized text
    size_t out_len, out_cap;
};

static uint8_t quick_class(uint32_t c) {
    if (u_getIntPropertyValue((UChar32)c, UCHAR_NFC_QUICK_CHECK) != UNORM_YES) return NOT_YES;
    return u_getCombiningClass((UChar32)c);
}

BpeNfc* bpe_nfc_open(char* err, size_t errlen) {
    UErrorCode e = U_ZERO_ERROR;
    const UNormalizer2* normalizer = unorm2_getNFCInstance(&e);
    if (U_FAILURE(e) || !normalizer) {
        set_err(err, errlen, "NFC: loading ICU's NFC data (unorm2_getNFCInstance): %s",
                u_errorName(e));
        return NULL;
    }
    BpeNfc* nfc = xcalloc(1, sizeof *nfc, "NFC normalizer");
    nfc->normalizer = normalizer;
    for (uint32_t c = 0; c < BMP; c++) nfc->quick[c] = quick_class(c);
    return nfc;
}

void bpe_nfc_free(BpeNfc* nfc) {
    if (!nfc) return;
    free(nfc->utf16);
    free(nfc->normal);
    free(nfc->out);
    free(nfc);
}

int bpe_nfc_boundary_before(uint32_t c) {
    UErrorCode e = U_ZERO_ERROR;
    const UNormalizer2* normalizer = unorm2_getNFCInstance(&e);
    return U_SUCCESS(e) && normalizer && unorm2_hasBoundaryBefore(normalizer, (UChar32)c);
}

int bpe_white_space(uint32_t c) { return u_isUWhiteSpace((UChar32)c) != 0; }

static int eight_ascii(const uint8_t* p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return (word & 0x8080808080808080ull) == 0;
}

// Unicode's quick check: every character NFC_QC=Yes and each run of combining marks in
// canonical order. Yes means the text is NFC; no means it may not be. Invalid bytes start over.
static int is_nfc(const BpeNfc* nfc, const uint8_t* p, size_t len) {
    uint8_t last = 0;
    for (size_t i = 0; i < len;) {
        if (len - i >= 8 && eight_ascii(p + i)) {
            last = 0;  // eight ASCII characters: starters that nothing composes with here
            i += 8;
            continue;
        }
        uint32_t c;
        const int k = bpe_utf8_decode(p + i, p + len, &c);
        if (k == 0) {
            last = 0;
            i++;
            continue;
        }
        const uint8_t ccc = c < BMP ? nfc->quick[c] : quick_class(c);
        if (ccc == NOT_YES || (ccc != 0 && ccc < last)) return 0;
        last = ccc;
        i += (size_t)k;
    }
    return 1;
}

static void* reserve(void* p, size_t* cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    void* q = realloc(p, c * elem);
    CHECK(q, "", "out of memory for %zu bytes of normalized text", c * elem);
    *cap = c;
    return q;
}

static void append(BpeNfc* nfc, const uint8_t* p, size_t n) {
    nfc->out = reserve(nfc->out, &nfc->out_cap, nfc->out_len + n, 1);
    memcpy(nfc->out + nfc->out_len, p, n);
    nfc->out_len += n;
}

// NFC of a run of valid UTF-8, appended to nfc->out.
static int normalize_run(BpeNfc* nfc, const uint8_t* p, size_t len, char* err, size_t errlen) {
    // ICU counts in int32_t: a byte is at most one UTF-16 code unit, NFC may triple those, and
    // each comes back as at most 3 bytes of UTF-8, so 9 len (and every capacity below, at most
    // twice what it needs, 6 len code units) stays within it.
    if (len > INT32_MAX / 9)
        return set_err(err, errlen, "NFC: a run of %zu bytes of UTF-8: expected at most %d",
                       len, INT32_MAX / 9);
    UErrorCode e = U_ZERO_ERROR;
    int32_t units = 0;
    nfc->utf16 = reserve(nfc->utf16, &nfc->utf16_cap, len, sizeof *nfc->utf16);
    u_strFromUTF8(nfc->utf16, (int32_t)nfc->utf16_cap, &units, (const char*)p, (int32_t)len, &e);
    if (U_FAILURE(e))
        return set_err(err, errlen, "NFC: converting %zu bytes of UTF-8 to UTF-16 "
                       "(u_strFromUTF8): %s", len, u_errorName(e));
    nfc->normal = reserve(nfc->normal, &nfc->normal_cap, (size_t)units, sizeof *nfc->normal);
    int32_t n = unorm2_normalize(nfc->normalizer, nfc->utf16, units, nfc->normal,
                                 (int32_t)nfc->normal_cap, &e);
    if (e == U_BUFFER_OVERFLOW_ERROR) {  // longer in NFC (e.g. a composition exclusion)
        e = U_ZERO_ERROR;
        nfc->normal = reserve(nfc->normal, &nfc->normal_cap, (size_t)n, sizeof *nfc->normal);
        n = unorm2_normalize(nfc->normalizer, nfc->utf16, units, nfc->normal,
                             (int32_t)nfc->normal_cap, &e);
    }
    if (U_FAILURE(e))
        return set_err(err, errlen, "NFC: normalizing %d UTF-16 code units (unorm2_normalize): "
                       "%s", units, u_errorName(e));
    int32_t bytes = 0;
    const size_t room = 3 * (size_t)n;  // a UTF-16 code unit is at most 3 bytes of UTF-8
    nfc->out = reserve(nfc->out, &nfc->out_cap, nfc->out_len + room, 1);
    u_strToUTF8((char*)nfc->out + nfc->out_len, (int32_t)room, &bytes, nfc->normal, n, &e);
    if (U_FAILURE(e))
        return set_err(err, errlen, "NFC: converting %d UTF-16 code units to UTF-8 "
                       "(u_strToUTF8): %s", n, u_errorName(e));
    nfc->out_len += (size_t)bytes;
    return 0;
}

// The end of the run of valid UTF-8 that begins at i (i itself when text[i] is invalid).
static size_t valid_run_end(const uint8_t* text, size_t i, size_t len) {
    uint32_t c;
    int k;
    while (i < len && (k = bpe_utf8_decode(text + i, text + len, &c)) > 0) i += (size_t)k;
    return i;
}

int bpe_nfc_apply(BpeNfc* nfc, const uint8_t* text, size_t len, const uint8_t** out,
                  size_t* out_len, char* err, size_t errlen) {
    if (is_nfc(nfc, text, len)) {
        *out = text;
        *out_len = len;
        return 0;
    }
    nfc->out_len = 0;
    for (size_t i = 0; i < len;) {
        const size_t end = valid_run_end(text, i, len);
        if (end == i) {  // an invalid byte, kept
            append(nfc, text + i, 1);
            i++;
        } else if (is_nfc(nfc, text + i, end - i)) {
            append(nfc, text + i, end - i);
            i = end;
        } else {
            if (normalize_run(nfc, text + i, end - i, err, errlen) != 0) return -1;
            i = end;
        }
    }
    *out = nfc->out;
    *out_len = nfc->out_len;
    return 0;
}

void bpe_nfc_versions(char* icu, size_t icu_len, char* unicode, size_t unicode_len) {
    UVersionInfo v;
    char text[U_MAX_VERSION_STRING_LENGTH];
    u_getVersion(v);
    u_versionToString(v, text);
    snprintf(icu, icu_len, "%s", text);
    u_getUnicodeVersion(v);
    u_versionToString(v, text);
    snprintf(unicode, unicode_len, "%s", text);
}
