// generate: text generation from a model file with a KV cache, on one process or a pq x pkv
// sequence-parallel mesh (prefill with ATTENTION2D, Ring, Striped or Zigzag; decoding with Tree
// Attention or the Ring baseline, the sequences of a batch together in one forward per step). Generated text goes to stdout; the configuration and statistics to stderr.
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "attention/dist_bounds.h"
#include "checkpoints/model_source.h"
#include "comm/comm_mpi.h"
#include "comm/fail.h"
#include "comm/flag_values.h"
#include "comm/transport.h"
#include "data/bpe.h"
#include "data/bpe_vocab.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer_file.h"
#include "inference/generator.h"
#include "model/backend.h"
#include "model/backend_transport.h"
#include "model/sampling.h"

#define DEFAULT_VOCAB_DIR BPE_DEFAULT_VOCAB_DIR
enum { MAX_PROMPTS = 64, MAX_STOPS = 16 };
static const char* const PREFILL_NAMES[] = {"2d",     "2d-overlap", "striped", "ring",
                                            "zigzag", "ulysses",    "usp"};   // PrefillSchedule

typedef struct {
    const char* model;
    const char* tokenizer;
    const char* vocab_dir;
    const char* prompt[MAX_PROMPTS];   // text, or comma-separated ids
    int prompt_is_ids[MAX_PROMPTS];
    int nprompts;
    int max_new;
    SamplingConfig sampling;
    unsigned long long seed;
    int stop[MAX_STOPS], nstops, stops_given;
    int pq, pkv;
    PrefillSchedule prefill;
    int a2a_chunks;           // ulysses and usp prefill: chunks of heads
    DecodeAlgorithm decode;
    int decode_batch;         // sequences per decode forward (0: all active ones)
    int print_ids;
    int prompt_bos;           // text prompts begin with the tokenizer's document token
    int recompute;            // the reference: every step a full forward, no cache (1 process)
    const char* logits_out;   // every decode step's logits (V float32 each), rank 0
    const char* comm;         // --comm (comm/transport.h)
    double comm_timeout;
    int context;              // a rotary model's context for this run (0: the file's)
    const char* rope_scaling; // --rope-scaling (NULL: the file's)
    double rope_factor;       // --rope-scaling-factor (0: context / original context)
    int rope_original;        // --rope-original-context (0: from the file)
} Options;

static void usage(FILE* f) {
    fprintf(f,
        "usage: generate --model FILE [options] (--prompt TEXT | --prompt-ids IDS)...\n"
        "Generates text from a model file (ours or llm.c's, fp32 or bf16) with a KV cache.\n"
        "Under mpirun: prefill sequence-parallel on a pq x pkv mesh, decoding over the sharded\n"
        "cache (Tree Attention). Text goes to stdout, configuration and statistics to stderr.\n"
        "\n"
        "  --model FILE          llm.c model file, or a Hugging Face GPT-2 or Llama directory\n"
        "                        (required)\n"
        "  --tokenizer FILE      llm.c tokenizer file, or a tokenizer.json or its directory:\n"
        "                        prints text, checks the vocabulary, and its end-of-text id\n"
        "                        (a tokenizer.json's document token) is the default stop token;\n"
        "                        a tokenizer.json also encodes text prompts (default: --model's\n"
        "                        tokenizer.json when it is a directory holding one)\n"
        "  --vocab-dir DIR       encoder.json and vocab.bpe for text prompts without a\n"
        "                        tokenizer.json (default " DEFAULT_VOCAB_DIR ")\n"
        "  --prompt TEXT         a prompt as text; repeat for a batch (at most %d)\n"
        "  --prompt-ids IDS      a prompt as comma-separated token ids; repeatable\n"
        "  --prompt-bos          text prompts begin with the tokenizer's document token (as\n"
        "                        Llama's tokenizers add <s> or <|begin_of_text|>; GPT-2's is\n"
        "                        <|endoftext|>)\n"
        "  --max-new-tokens N    tokens to generate per prompt (default 64)\n"
        "  --greedy              the most likely token every step (same as --temperature 0)\n"
        "  --temperature T       softmax temperature, >= 0 (default 1; 0 = greedy)\n"
        "  --top-k K             sample from the K most likely tokens (default 0 = all)\n"
        "  --top-p P             nucleus sampling, 0 < P <= 1 (default 1 = off)\n"
        "  --seed S              random seed (default 1337)\n"
        "  --stop IDS            comma-separated stop token ids (replaces the default)\n"
        "  --pq N --pkv N        the sequence-parallel mesh (default 1 x 1; pq * pkv = ranks)\n"
        "  --prefill NAME        2d, 2d-overlap, striped, ring, zigzag, ulysses or usp (default\n"
        "                        2d; ulysses: P = pq x pkv must divide the heads; usp: pq must)\n"
        "  --a2a-chunks N        ulysses and usp prefill: each rank's heads in N chunks, whose\n"
        "                        all-to-alls travel while another computes (default 1; N must\n"
        "                        divide the heads per rank, at most %d)\n"
        "  --decode NAME         tree (default) or ring (the baseline: K/V shards rotated)\n"
        "  --decode-batch N      sequences decoded together per forward (default 0: all that are\n"
        "                        still generating; 1: one at a time)\n"
        "  --print WHAT          text (default with --tokenizer) or ids\n"
        "  --recompute           no cache: every step runs the model over the whole sequence\n"
        "                        (the reference of the cache; one process)\n"
        "  --logits-out FILE     writes each step's logits (V float32) to FILE, in decode order\n"
        "  --comm NAME           auto (default), mpi (CPU), nccl or mpi-staged (CUDA builds)\n"
        "  --comm-timeout S      seconds a wait for communication may last (default 300, as the trainer; 0: none)\n"
        "  --context N           a rotary model's context for this run, past the file's too\n"
        "                        (default 0: the file's; learned positions keep theirs)\n"
        "  --rope-scaling NAME   a rotary model's frequencies for a longer context: linear, yarn\n"
        "                        or llama3 (as the trainer's), none (default: the file's)\n"
        "  --rope-scaling-factor X  the factor, >= 1 (default 0: --context / the original context)\n"
        "  --rope-original-context N  the context the frequencies were trained at (default 0:\n"
        "                        the file's context, or its original one when already scaled)\n"
        "  --help                this text\n",
        MAX_PROMPTS, ULYSSES_MAX_CHUNKS);
}

// Comma-separated ids below V into ids (at most max); returns how many.
static int parse_ids(const char* flag, const char* s, int V, int* ids, int max) {
    int n = 0;
    const char* p = s;
    while (*p) {
        char* end;
        errno = 0;
        const long id = strtol(p, &end, 10);
        if (end == p || errno || id < 0 || id >= V || (*end && *end != ',') || n == max)
            fail_msg("%s: expected comma-separated token ids below %d (at most %d), found '%s'",
                     flag, V, max, s);
        ids[n++] = (int)id;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

static void parse_options(int argc, char** argv, Options* o) {
    enum { MODEL = 256, TOKENIZER, VOCAB, PROMPT, PROMPT_IDS, MAX_NEW, GREEDY, TEMP, TOPK, TOPP,
           SEED, STOP, PQ, PKV, PREFILL, DECODE, DECODE_BATCH, PRINT, RECOMPUTE, LOGITS_OUT, COMM, COMM_TIMEOUT, A2A_CHUNKS,
           CONTEXT, ROPE_SCALING, ROPE_FACTOR, ROPE_ORIGINAL, PROMPT_BOS, HELP };
    static const struct option longopts[] = {
        {"model", required_argument, 0, MODEL}, {"tokenizer", required_argument, 0, TOKENIZER},
        {"vocab-dir", required_argument, 0, VOCAB}, {"prompt", required_argument, 0, PROMPT},
        {"prompt-ids", required_argument, 0, PROMPT_IDS},
        {"max-new-tokens", required_argument, 0, MAX_NEW}, {"greedy", no_argument, 0, GREEDY},
        {"temperature", required_argument, 0, TEMP}, {"top-k", required_argument, 0, TOPK},
        {"top-p", required_argument, 0, TOPP}, {"seed", required_argument, 0, SEED},
        {"stop", required_argument, 0, STOP}, {"pq", required_argument, 0, PQ},
        {"pkv", required_argument, 0, PKV}, {"prefill", required_argument, 0, PREFILL},
        {"decode", required_argument, 0, DECODE},
        {"decode-batch", required_argument, 0, DECODE_BATCH}, {"print", required_argument, 0, PRINT},
        {"recompute", no_argument, 0, RECOMPUTE}, {"logits-out", required_argument, 0, LOGITS_OUT},
        {"comm", required_argument, 0, COMM}, {"comm-timeout", required_argument, 0, COMM_TIMEOUT},
        {"a2a-chunks", required_argument, 0, A2A_CHUNKS},
        {"context", required_argument, 0, CONTEXT}, {"rope-scaling", required_argument, 0, ROPE_SCALING},
        {"rope-scaling-factor", required_argument, 0, ROPE_FACTOR},
        {"rope-original-context", required_argument, 0, ROPE_ORIGINAL},
        {"prompt-bos", no_argument, 0, PROMPT_BOS},
        {"help", no_argument, 0, HELP}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->vocab_dir = DEFAULT_VOCAB_DIR;
    o->max_new = 64;
    o->sampling = (SamplingConfig){1.0, 0, 1.0};
    o->seed = 1337;
    o->pq = o->pkv = 1;
    o->a2a_chunks = 1;
    o->print_ids = -1;
    o->comm = "auto";
    o->comm_timeout = COMM_DEFAULT_TIMEOUT_S;
    const char* stops = NULL;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case MODEL: o->model = optarg; break;
        case TOKENIZER: o->tokenizer = optarg; break;
        case VOCAB: o->vocab_dir = optarg; break;
        case PROMPT: case PROMPT_IDS:
            if (o->nprompts == MAX_PROMPTS)
                fail_msg("--prompt: expected at most %d prompts, found more", MAX_PROMPTS);
            o->prompt_is_ids[o->nprompts] = c == PROMPT_IDS;
            o->prompt[o->nprompts++] = optarg;
            break;
        case MAX_NEW: o->max_new = (int)flag_long("max-new-tokens", optarg, 0, 1 << 24); break;
        case GREEDY: o->sampling.temperature = 0; break;
        case PROMPT_BOS: o->prompt_bos = 1; break;
        case TEMP: o->sampling.temperature = flag_double("temperature", optarg, 0, 100); break;
        case TOPK: o->sampling.top_k = (int)flag_long("top-k", optarg, 0, 1 << 24); break;
        case TOPP: o->sampling.top_p = flag_double("top-p", optarg, 1e-9, 1); break;
        case SEED: o->seed = (unsigned long long)flag_long("seed", optarg, 0, 1L << 62); break;
        case STOP: stops = optarg; break;
        case PQ: o->pq = (int)flag_long("pq", optarg, 1, 4096); break;
        case PKV: o->pkv = (int)flag_long("pkv", optarg, 1, 4096); break;
        case PREFILL:
            if (!strcmp(optarg, "2d")) o->prefill = PREFILL_2D;
            else if (!strcmp(optarg, "2d-overlap")) o->prefill = PREFILL_2D_OVERLAP;
            else if (!strcmp(optarg, "striped")) o->prefill = PREFILL_STRIPED;
            else if (!strcmp(optarg, "ring")) o->prefill = PREFILL_RING;
            else if (!strcmp(optarg, "zigzag")) o->prefill = PREFILL_ZIGZAG;
            else if (!strcmp(optarg, "ulysses")) o->prefill = PREFILL_ULYSSES;
            else if (!strcmp(optarg, "usp")) o->prefill = PREFILL_USP;
            else fail_msg("--prefill: expected 2d, 2d-overlap, striped, ring, zigzag, ulysses or "
                          "usp, found '%s'", optarg);
            break;
        case DECODE:
            if (!strcmp(optarg, "tree")) o->decode = DECODE_TREE;
            else if (!strcmp(optarg, "ring")) o->decode = DECODE_RING;
            else fail_msg("--decode: expected tree or ring, found '%s'", optarg);
            break;
        case DECODE_BATCH:
            o->decode_batch = (int)flag_long("decode-batch", optarg, 0, MAX_PROMPTS);
            break;
        case PRINT:
            if (!strcmp(optarg, "text")) o->print_ids = 0;
            else if (!strcmp(optarg, "ids")) o->print_ids = 1;
            else fail_msg("--print: expected text or ids, found '%s'", optarg);
            break;
        case RECOMPUTE: o->recompute = 1; break;
        case LOGITS_OUT: o->logits_out = optarg; break;
        case A2A_CHUNKS:
            o->a2a_chunks = (int)flag_long("a2a-chunks", optarg, 1, ULYSSES_MAX_CHUNKS);
            break;
        case COMM:
            if (strcmp(optarg, "auto") && strcmp(optarg, "mpi") && strcmp(optarg, "nccl") &&
                strcmp(optarg, "mpi-staged"))
                fail_msg("--comm: expected auto, mpi, nccl or mpi-staged, found '%s'", optarg);
            o->comm = optarg;
            break;
        case COMM_TIMEOUT: o->comm_timeout = flag_double("comm-timeout", optarg, 0, 1e9); break;
        case CONTEXT: o->context = (int)flag_long("context", optarg, 0, 1 << 22); break;
        case ROPE_SCALING: o->rope_scaling = optarg; break;
        case ROPE_FACTOR: o->rope_factor = flag_double("rope-scaling-factor", optarg, 0, 65536); break;
        case ROPE_ORIGINAL:
            o->rope_original = (int)flag_long("rope-original-context", optarg, 0, 1 << 22);
            break;
        case HELP: usage(stdout); exit(0);
        default:
            fail_msg("%s: unknown option or missing value (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) fail_msg("'%s': expected no positional arguments (see --help)", argv[optind]);
    if (!o->model) fail_msg("--model: expected a model file, found none (see --help)");
    if (o->nprompts == 0) fail_msg("--prompt: expected at least one prompt, found none");
    if (stops) {
        o->stops_given = 1;
        o->nstops = parse_ids("--stop", stops, 1 << 30, o->stop, MAX_STOPS);
    }
    char* model_tokenizer = xmalloc(4096, "path");  // a Hugging Face directory's own
    struct stat st;                                 // tokenizer.json, for the whole run
    if (!o->tokenizer && stat(o->model, &st) == 0 && S_ISDIR(st.st_mode) &&
        hf_tokenizer_locate(o->model, model_tokenizer, 4096))
        o->tokenizer = model_tokenizer;
    else
        free(model_tokenizer);
    if (o->print_ids < 0) o->print_ids = o->tokenizer == NULL;
    if (o->print_ids == 0 && !o->tokenizer) fail_msg("--print text: expected --tokenizer FILE, found none");
}

// --context and --rope-scaling on the model file's shape: a rotary model has no parameter that
// depends on the context, so it may run at a longer one, with its frequencies scaled (context
// extension, as the trainer's --init-from); a learned table has as many rows as its context.
static void extend_context(const Options* o, GPTConfig* cfg) {
    const GPTConfig file = *cfg;
    char err[ERR_LEN], model[ERR_LEN];
    snprintf(model, sizeof model, "the model %s", o->model);
    if (gpt_context_apply(cfg, o->context, model, err, sizeof err) != 0) fail_msg("%s", err);
    if (gpt_rope_scaling_apply(cfg, &file, o->rope_scaling, o->rope_factor, o->rope_original, err,
                               sizeof err) != 0)
        fail_msg("%s", err);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// The prompts as token ids: text through the BPE encoder, ids parsed. Checks lengths.
static int** encode_prompts(const Options* o, const GPTConfig* cfg, int* len) {
    int** ids = (int**)xcalloc((size_t)o->nprompts, sizeof(int*), "prompts");
    BpeEncoder* enc = NULL;
    char err[ERR_LEN], json[4096];
    const int own = o->tokenizer && hf_tokenizer_locate(o->tokenizer, json, sizeof json);
    const char* source = own ? o->tokenizer : o->vocab_dir;
    for (int p = 0; p < o->nprompts; p++) {
        const char* s = o->prompt[p];
        if (o->prompt_is_ids[p]) {
            ids[p] = (int*)xmalloc(sizeof(int) * cfg->max_T, "prompt ids");
            len[p] = parse_ids("--prompt-ids", s, cfg->V, ids[p], cfg->max_T);
        } else {
            if (!enc && !(enc = bpe_encoder_load(source, err, sizeof err)))
                fail_msg("%s %s (for text prompts): %s", own ? "--tokenizer" : "--vocab-dir",
                         source, err);
            TokenBuf buf = {0};
            const uint32_t bos = bpe_encoder_tokens(enc)->eot_id;
            if (o->prompt_bos && bos == TOKENIZER_NO_EOT)
                fail_msg("--prompt-bos: %s has no document token", source);
            if (o->prompt_bos) token_buf_push(&buf, bos);
            if (bpe_encode(enc, (const uint8_t*)s, strlen(s), &buf, err, sizeof err) != 0)
                fail_msg("--prompt %d: %s", p + 1, err);
            ids[p] = (int*)xmalloc(sizeof(int) * (buf.n ? buf.n : 1), "prompt ids");
            for (size_t i = 0; i < buf.n; i++) {
                if (buf.ids[i] >= (uint32_t)cfg->V)
                    fail_msg("--prompt %d: token %u of %s's encoding is outside the model's "
                             "vocabulary of %d (a model trained on another tokenizer?)",
                             p + 1, buf.ids[i], source, cfg->V);
                ids[p][i] = (int)buf.ids[i];
            }
            len[p] = (int)buf.n;
            token_buf_free(&buf);
        }
        if (len[p] == 0) fail_msg("prompt %d: empty (expected at least one token)", p + 1);
        if (len[p] >= cfg->max_T)
            fail_msg("prompt %d: %d tokens: expected fewer than the model's context of %d", p + 1,
                     len[p], cfg->max_T);
    }
    bpe_encoder_free(enc);
    return ids;
}

// Writes the bytes of one token to stdout (ids when there is no tokenizer); first: the sequence's
// first token, whose leading space a SentencePiece-style decoder drops (bpe_token_text).
static void print_token(const TokenTable* table, int id, int first) {
    size_t n = 0;
    const uint8_t* bytes = table ? bpe_token_text(table, (uint32_t)id, first, &n) : NULL;
    if (bytes) fwrite(bytes, 1, n, stdout);
    else printf(" %d", id);
}

// Attention bytes this rank received so far over the model's layers (decode counts under them).
static long long attention_bytes(const Comm* comm, int L) {
    long long s = 0;
    for (int l = 0; l < L; l++) s += comm_count_total(comm, l, COMM_FORWARD).bytes;
    return s;
}

int main(int argc, char** argv) {
    int world_rank, world_size;
    comm_mpi_init(&argc, &argv, &world_rank, &world_size);
    Options o;
    parse_options(argc, argv, &o);
    char err[ERR_LEN];
    GPTConfig cfg;
    const char* model_kind;
    if (model_source_config(o.model, &cfg, &model_kind, err, sizeof err) != 0) fail_msg("%s", err);
    const GPTConfig file_cfg = cfg;   // the file's shape, which loading checks
    extend_context(&o, &cfg);
    if (gpt_backend_head_size(cfg.C / cfg.NH, err, sizeof err) != 0)
        fail_msg("--model %s: %s", o.model, err);
    TokenTable table = {0};
    const int has_table = o.tokenizer != NULL;
    if (has_table) {
        if (bpe_token_table_load(o.tokenizer, &table, err, sizeof err) != 0)
            fail_msg("--tokenizer %s", err);
        if ((int)table.vocab_size != cfg.V)
            fail_msg("--tokenizer %s: vocabulary of %u tokens, but the model %s has V = %d "
                     "(expected the tokenizer the model was trained with)",
                     o.tokenizer, table.vocab_size, o.model, cfg.V);
        if (!o.stops_given && table.eot_id != TOKENIZER_NO_EOT) o.stop[o.nstops++] = (int)table.eot_id;
    }
    Mesh mesh;
    if (mesh_init(&mesh, 1, o.pq, o.pkv, world_rank, world_size, err) != 0) fail_msg("%s", err);
    if (o.recompute && mesh.P > 1)
        fail_msg("--recompute: runs on one process, found a mesh of %d x %d", o.pq, o.pkv);
    // Decoding a banded layer needs each cached key's true position: the cyclic layout's.
    if (cfg.window && mesh.P > 1 && (o.prefill == PREFILL_RING || o.prefill == PREFILL_ZIGZAG))
        fail_msg("--prefill %s: the model %s has sliding-window attention (window %d), whose "
                 "decoding needs the cyclic layout: use --prefill 2d, 2d-overlap or striped",
                 o.prefill == PREFILL_RING ? "ring" : "zigzag", o.model, cfg.window);
    // Ulysses and USP split the key/value heads with their query heads (the heads under MHA).
    const int nkv = gpt_kv_heads(&cfg);
    const char* heads = nkv == cfg.NH ? "heads" : "key/value heads";
    if (o.prefill == PREFILL_ULYSSES && mesh.P > 1 && nkv % mesh.P != 0)
        fail_msg("--prefill ulysses: the model %s has %d %s, which do not split over the "
                 "P = %d ranks of --pq %d x --pkv %d", o.model, nkv, heads, mesh.P, o.pq, o.pkv);
    if (o.prefill == PREFILL_USP && mesh.P > 1 && nkv % mesh.pq != 0)
        fail_msg("--prefill usp: the model %s has %d %s, which do not split over the "
                 "--pq %d ranks of a mesh column", o.model, nkv, heads, o.pq);
    char what[64];
    snprintf(what, sizeof what, "--prefill %s", PREFILL_NAMES[o.prefill]);
    if (dist_chunks_check(o.a2a_chunks, o.prefill == PREFILL_ULYSSES || o.prefill == PREFILL_USP,
                          nkv / (o.prefill == PREFILL_USP ? mesh.pq : mesh.P), what, err,
                          sizeof err))
        fail_msg("%s", err);
    // The transport and this rank's device, before any other backend call.
    const TransportOptions to = {o.comm, "mpi", NULL, 60, o.comm_timeout};
    int device;
    const char* transport = gpt_backend_transport(&to, world_size, &device);
    int* len = (int*)xmalloc(sizeof(int) * o.nprompts, "prompt lengths");
    int** tokens = encode_prompts(&o, &cfg, len);
    float* params = (float*)xmalloc(sizeof(float) * gpt_num_params(&cfg), "model parameters");
    if (model_source_load(o.model, &file_cfg, params, err, sizeof err) != 0) fail_msg("%s", err);
    Comm* comm = transport_create(&mesh, cfg.L, transport, &to);
    const int B = o.nprompts, P = mesh.P, rank0 = world_rank == 0;
    if (rank0) {
        char window[96], positions[96], block[GPT_BLOCK_TEXT_LEN];
        gpt_window_text(&cfg, window, sizeof window);
        gpt_position_text(&cfg, positions, sizeof positions);
        gpt_block_text(&cfg, block, sizeof block);
        fprintf(stderr, "generate: model %s (%s, L=%d C=%d NH=%d V=%d context %d, %s, %s%s%s), "
                "backend %s\n", o.model, model_kind, cfg.L, cfg.C, cfg.NH, cfg.V, cfg.max_T,
                positions, block, cfg.window ? ", " : "", cfg.window ? window : "",
                gpt_backend_name());
        fprintf(stderr, "  transport %s\n", transport);
        char chunks[40] = "";
        if (P > 1 && o.a2a_chunks > 1)
            snprintf(chunks, sizeof chunks, " (heads in %d chunks)", o.a2a_chunks);
        fprintf(stderr, "  mesh %d x %d, prefill %s%s, decode %s (batch %d); %d prompt(s), max %d "
                "new tokens, temperature %g top-k %d top-p %g seed %llu, %d stop token(s)\n",
                o.pq, o.pkv, P == 1 ? "local" : PREFILL_NAMES[o.prefill], chunks,
                o.recompute ? "recompute (no cache)" : o.decode == DECODE_TREE ? "tree" : "ring",
                o.recompute ? 1 : o.decode_batch ? o.decode_batch : B, B, o.max_new,
                o.sampling.temperature, o.sampling.top_k, o.sampling.top_p, o.seed, o.nstops);
    }
    Generator g;
    generator_create(&g, &cfg, params, B, comm, o.prefill, o.a2a_chunks, o.decode);
    free(params);

    // Prefill everything but each prompt's last token, which the first decode step feeds (its
    // logits are the first ones sampled, computed the same way on every rank).
    int* n = (int*)xmalloc(sizeof(int) * B, "sequence lengths");
    int** seq = (int**)xmalloc(sizeof(int*) * B, "sequences");
    long prefill_tokens = 0;
    for (int b = 0; b < B; b++) {
        seq[b] = (int*)xmalloc(sizeof(int) * cfg.max_T, "sequence");
        memcpy(seq[b], tokens[b], sizeof(int) * len[b]);
        n[b] = len[b] - 1;
        prefill_tokens += n[b];
    }
    FILE* logits_out = NULL;
    if (o.logits_out && rank0 && !(logits_out = fopen(o.logits_out, "wb")))
        fail_msg("--logits-out %s: cannot open for writing (%s)", o.logits_out, strerror(errno));
    comm_barrier(comm, MESH_WORLD);
    double t0 = now_s();
    if (!o.recompute) generator_prefill(&g, (const int* const*)seq, n);
    comm_barrier(comm, MESH_WORLD);
    const double prefill_s = now_s() - t0;
    const long long prefill_bytes = attention_bytes(comm, cfg.L);

    TokenSampler sampler;
    token_sampler_create(&sampler, cfg.V);
    uint64_t rng = o.seed;
    int* done = (int*)xcalloc((size_t)B, sizeof(int), "finished flags");
    int* produced = (int*)xcalloc((size_t)B, sizeof(int), "generated counts");
    const int stream = rank0 && B == 1 && !o.print_ids;
    if (stream) {
        for (int i = 0; i < len[0]; i++) print_token(&table, seq[0][i], i == 0);
        fflush(stdout);
    }
    // Each step decodes every unfinished sequence, per_forward of them per forward (in order, so
    // that sampling draws from rng in the same order whatever the grouping).
    const int per_forward = o.recompute ? 1 : o.decode_batch ? o.decode_batch : B;
    int* rows = (int*)xmalloc(sizeof(int) * B, "decode rows");
    int* feed = (int*)xmalloc(sizeof(int) * B, "decode tokens");
    int* drawn = (int*)xmalloc(sizeof(int) * B, "drawn tokens");
    long decoded = 0, forwards = 0, mismatches = 0;
    long long first_bytes = -1, last_bytes = -1;
    t0 = now_s();
    for (int active = o.max_new > 0 ? B : 0; active > 0;) {
        int m = 0;
        for (int b = 0; b < B; b++)
            if (!done[b]) rows[m++] = b;
        active = 0;
        for (int first = 0; first < m; first += per_forward) {
            const int k = m - first < per_forward ? m - first : per_forward;
            const int* sq = rows + first;
            for (int i = 0; i < k; i++) feed[i] = seq[sq[i]][n[sq[i]]];
            const long long before = attention_bytes(comm, cfg.L);
            const float* logits = o.recompute ? generator_full_logits(&g, seq[sq[0]], n[sq[0]] + 1)
                                              : generator_decode_batch(&g, k, sq, feed);
            const long long bytes = attention_bytes(comm, cfg.L) - before;
            long long want = 0;
            for (int i = 0; i < k; i++) want += generator_decode_bytes(&g, sq[i], n[sq[i]]);
            mismatches += bytes != want;
            if (first_bytes < 0) first_bytes = bytes;
            last_bytes = bytes;
            forwards++;
            for (int i = 0; i < k; i++) {
                const float* row = logits + (size_t)i * cfg.V;
                if (logits_out && fwrite(row, sizeof(float), (size_t)cfg.V, logits_out) != (size_t)cfg.V)
                    fail_msg("--logits-out %s: write failed (%s)", o.logits_out, strerror(errno));
                drawn[i] = token_sampler_draw(&sampler, row, &o.sampling, &rng);
                if (P > 1 && g.rank != 0) drawn[i] = 0;
            }
            // Every rank takes SP rank 0's tokens (a host sum: 0 elsewhere).
            if (P > 1) comm_all_reduce_host(comm, MESH_SP, drawn, k, COMM_I32);
            for (int i = 0; i < k; i++) {
                const int b = sq[i], tok = drawn[i];
                seq[b][++n[b]] = tok;
                produced[b]++;
                decoded++;
                if (stream) {
                    print_token(&table, tok, 0);
                    fflush(stdout);
                }
                int stop = produced[b] >= o.max_new || n[b] + 1 >= cfg.max_T;
                for (int s = 0; s < o.nstops; s++) stop |= tok == o.stop[s];
                done[b] = stop;
                active += !stop;
            }
        }
    }
    comm_barrier(comm, MESH_WORLD);
    const double decode_s = now_s() - t0;
    if (stream) printf("\n");
    if (logits_out && fclose(logits_out) != 0)
        fail_msg("--logits-out %s: write failed (%s)", o.logits_out, strerror(errno));
    if (rank0 && !stream) {
        for (int b = 0; b < B; b++) {
            const int total = n[b] + 1;
            if (o.print_ids) {
                printf("%d:", b);
                for (int i = len[b]; i < total; i++) printf(" %d", seq[b][i]);
                printf("\n");
            } else {
                printf("[%d] ", b);
                for (int i = 0; i < total; i++) print_token(&table, seq[b][i], i == 0);
                printf("\n");
            }
        }
    }
    fflush(stdout);
    int mism = (int)mismatches;
    comm_all_reduce_host(comm, MESH_WORLD, &mism, 1, COMM_I32);
    if (rank0) {
        fprintf(stderr, "prefill: %ld tokens in %.3f s, %.1f tokens/s, %lld attention bytes on rank 0\n",
                prefill_tokens, prefill_s, prefill_s > 0 ? prefill_tokens / prefill_s : 0.0,
                prefill_bytes);
        fprintf(stderr, "decode: %ld tokens in %.3f s, %.1f tokens/s, %ld forwards\n", decoded,
                decode_s, decode_s > 0 ? decoded / decode_s : 0.0, forwards);
        fprintf(stderr, "decode bytes per forward on rank 0 (the per-token bytes of each sequence "
                "decoded): first %lld last %lld; forwards whose bytes differ from the formula "
                "(all ranks): %d\n", first_bytes, last_bytes, mism);
    }
    token_sampler_free(&sampler);
    for (int b = 0; b < B; b++) {
        free(seq[b]);
        free(tokens[b]);
    }
    free(seq), free(tokens), free(n), free(len), free(done), free(produced);
    free(rows), free(feed), free(drawn);
    generator_free(&g);
    if (has_table) token_table_free(&table);
    comm_destroy(comm);
    comm_mpi_finalize();
    return mism != 0;
}
