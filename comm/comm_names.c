// The names and sizes of the comm layer's enumerations (element types, operation kinds, phases),
// for messages, counters and timeline labels.
#include "comm/comm.h"

#include "comm/fail.h"

size_t comm_type_size(CommType t) {
    switch (t) {
    case COMM_F32: return 4;
    case COMM_F64: return 8;
    case COMM_I32: return 4;
    case COMM_U8: return 1;
    case COMM_BF16: return 2;
    default: FAIL("caller bug", "unknown comm element type %d", (int)t);
    }
}

const char* comm_kind_name(CommKind kind) {
    static const char* names[COMM_NKINDS] = {"all-gather", "reduce-scatter", "all-reduce",
                                             "all-to-all", "send-recv",  "broadcast",
                                             "barrier"};
    return kind >= 0 && kind < COMM_NKINDS ? names[kind] : "?";
}

const char* comm_phase_name(CommPhase phase) {
    static const char* names[COMM_NPHASES] = {"forward", "backward", "other"};
    return phase >= 0 && phase < COMM_NPHASES ? names[phase] : "?";
}
