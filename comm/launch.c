#include "comm/launch.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/fail.h"

// A value that is not an integer (or a negative count): fails every range check below.
#define NOT_AN_INT INT_MIN

// How a value is named in messages: `name` alone ("SLURM_NTASKS", "--world-size") and `shown`
// with its value ("SLURM_NTASKS='x'", "--world-size 0").
typedef struct {
    char name[64];
    char shown[192];
} Label;

typedef struct {
    Label rank, size, local_rank, local_size;
} Labels;

typedef struct {
    const char* source;
    const char *rank, *size, *local_rank;
    const char* local_size;  // NULL: Slurm's rule (slurm_local_size)
} LauncherVars;

// A whole decimal integer (no sign but '-', no spaces), or NOT_AN_INT.
static int parse_int(const char* text) {
    if (!isdigit((unsigned char)text[0]) && !(text[0] == '-' && isdigit((unsigned char)text[1])))
        return NOT_AN_INT;
    char* end = NULL;
    errno = 0;
    const long v = strtol(text, &end, 10);
    if (*end || errno == ERANGE || v <= INT_MIN || v > INT_MAX) return NOT_AN_INT;
    return (int)v;
}

// The one check of a layout, from the environment or the flags.
static int check_layout(const LaunchInfo* li, const Labels* lb, char* err) {
    if (li->world_size < 1)
        return set_err(err, ERR_LEN, "%s: expected a positive integer", lb->size.shown);
    if (li->rank < 0 || li->rank >= li->world_size)
        return set_err(err, ERR_LEN, "%s: expected an integer in [0, %s) = [0, %d)",
                       lb->rank.shown, lb->size.name, li->world_size);
    if (li->local_size != -1 && (li->local_size < 1 || li->local_size > li->world_size))
        return set_err(err, ERR_LEN, "%s: expected an integer in [1, %s] = [1, %d]",
                       lb->local_size.shown, lb->size.name, li->world_size);
    const int known = li->local_size != -1;
    const int local_bound = known ? li->local_size : li->world_size;
    if (li->local_rank < 0 || li->local_rank >= local_bound)
        return set_err(err, ERR_LEN, "%s: expected an integer in [0, %s) = [0, %d)",
                       lb->local_rank.shown, known ? lb->local_size.name : lb->size.name,
                       local_bound);
    return 0;
}

// Reads variable `name` into *value (NOT_AN_INT when it is no integer) and names it in *label.
// Returns 0, or -1 when it is not set (*value untouched).
static int env_value(const char* name, int* value, Label* label) {
    snprintf(label->name, sizeof label->name, "%s", name);
    const char* text = getenv(name);
    if (!text) return -1;
    snprintf(label->shown, sizeof label->shown, "%s='%s'", name, text);
    *value = parse_int(text);
    return 0;
}

// Tasks on node `node` from SLURM_TASKS_PER_NODE, e.g. "4(x2),3" = 4, 4, 3 tasks on nodes 0-2.
// Returns the count, or -1 when the text is malformed or lists fewer nodes.
static int slurm_tasks_on_node(const char* text, int node) {
    int found = -1;
    long first = 0;  // the node the current entry starts at
    const char* p = text;
    for (;;) {
        if (!isdigit((unsigned char)*p)) return -1;
        char* end = NULL;
        errno = 0;
        const long count = strtol(p, &end, 10);
        long repeat = 1;
        if (*end == '(') {
            if (end[1] != 'x' || !isdigit((unsigned char)end[2])) return -1;
            repeat = strtol(end + 2, &end, 10);
            if (*end != ')') return -1;
            end++;
        }
        if (errno == ERANGE || count < 1 || count > INT_MAX || repeat < 1 || repeat > INT_MAX)
            return -1;
        if (found < 0 && node >= first && node - first < repeat) found = (int)count;
        first += repeat;
        if (*end == '\0') return found;
        if (*end != ',') return -1;
        p = end + 1;
    }
}

// Slurm's local size: SLURM_NTASKS_PER_NODE when set, else this node's entry of
// SLURM_TASKS_PER_NODE; -1 (unknown) when neither can be read for lack of variables.
static int slurm_local_size(int* local_size, Label* label, char* err) {
    if (env_value("SLURM_NTASKS_PER_NODE", local_size, label) == 0) {
        if (*local_size < 0) *local_size = NOT_AN_INT;
        return 0;
    }
    const char* per_node = getenv("SLURM_TASKS_PER_NODE");
    const char* node_text = getenv("SLURM_NODEID");
    if (!per_node || !node_text) return 0;
    const int node = parse_int(node_text);
    if (node < 0)
        return set_err(err, ERR_LEN, "SLURM_NODEID='%s': expected a non-negative integer",
                       node_text);
    const int n = slurm_tasks_on_node(per_node, node);
    if (n < 1)
        return set_err(err, ERR_LEN,
                       "SLURM_TASKS_PER_NODE='%s': expected counts like '4(x2),3' with an entry "
                       "for SLURM_NODEID=%d", per_node, node);
    *local_size = n;
    snprintf(label->name, sizeof label->name, "SLURM_TASKS_PER_NODE");
    snprintf(label->shown, sizeof label->shown, "SLURM_TASKS_PER_NODE='%s' at SLURM_NODEID=%d",
             per_node, node);
    return 0;
}

static int read_launcher(const LauncherVars* lv, LaunchInfo* li, char* err) {
    LaunchInfo got = {.local_size = -1};
    Labels lb;
    memset(&lb, 0, sizeof lb);
    snprintf(got.source, sizeof got.source, "%s", lv->source);
    const char* required[3] = {lv->rank, lv->size, lv->local_rank};
    int* values[3] = {&got.rank, &got.world_size, &got.local_rank};
    Label* labels[3] = {&lb.rank, &lb.size, &lb.local_rank};
    for (int i = 0; i < 3; i++)
        if (env_value(required[i], values[i], labels[i]) != 0)
            return set_err(err, ERR_LEN, "%s is set but %s is not: expected both from a %s launch",
                           lv->rank, required[i], lv->source);
    if (lv->local_size) {
        if (env_value(lv->local_size, &got.local_size, &lb.local_size) == 0 && got.local_size < 0)
            got.local_size = NOT_AN_INT;
    } else if (slurm_local_size(&got.local_size, &lb.local_size, err) != 0) {
        return -1;
    }
    if (check_layout(&got, &lb, err) != 0) return -1;
    *li = got;
    return 0;
}

int launch_info_from_env(LaunchInfo* li, char* err) {
    static const LauncherVars launchers[] = {
        {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL},
        {"MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
        {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    };
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++)
        if (getenv(launchers[i].rank)) return read_launcher(&launchers[i], li, err);
    *li = (LaunchInfo){.rank = 0, .world_size = 1, .local_rank = 0, .local_size = 1};
    snprintf(li->source, sizeof li->source, "none");
    return 0;
}

// Names a value for messages by its flag: "--rank 5" when given, else
// "--rank (not given: 3 from Slurm)".
static void flag_label(Label* label, const char* flag, int given, int kept, const char* source) {
    snprintf(label->name, sizeof label->name, "%s", flag);
    if (given >= 0)
        snprintf(label->shown, sizeof label->shown, "%s %d", flag, given);
    else
        snprintf(label->shown, sizeof label->shown, "%s (not given: %d from %s)", flag, kept,
                 strcmp(source, "none") ? source : "no launcher");
}

int launch_info_override(LaunchInfo* li, int rank, int world_size, int local_rank, char* err) {
    if (rank < 0 && world_size < 0 && local_rank < 0) return 0;
    LaunchInfo got = *li;
    Labels lb;
    memset(&lb, 0, sizeof lb);
    flag_label(&lb.rank, "--rank", rank, li->rank, li->source);
    flag_label(&lb.size, "--world-size", world_size, li->world_size, li->source);
    flag_label(&lb.local_rank, "--local-rank", local_rank, li->local_rank, li->source);
    if (rank >= 0) got.rank = rank;
    if (world_size >= 0) got.world_size = world_size;
    if (local_rank >= 0) got.local_rank = local_rank;
    got.local_size = -1;
    if (strcmp(li->source, "none") == 0)
        snprintf(got.source, sizeof got.source, "flags");
    else
        snprintf(got.source, sizeof got.source, "flags over %.40s", li->source);
    if (check_layout(&got, &lb, err) != 0) return -1;
    *li = got;
    return 0;
}
