// --png DIR: the pictures of a simulation, drawn by gnuplot (pngcairo) from inline data blocks:
//   matrix-rank.png       the T x T matrix coloured by the rank computing each cell (white: masked;
//                         not drawn for Ulysses, where every rank computes every cell for its heads)
//   matrix-step.png       ring family: the same coloured by ring step
//   mesh.png              the pq x pkv mesh with its row and column groups (ring family: the ring;
//                         Ulysses: the all-to-all among the P ranks)
//   transfers-forward.png, transfers-backward.png
//                         one panel per communication step: who sends to whom
//   bytes-vs-p.png        bytes the busiest rank receives per layer (forward + backward) against P
//                         for ATTENTION2D (square meshes), Ring and Striped, at this shape
// Names are prefixed with the algorithm (e.g. 2d-matrix-rank.png).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "comm/fail.h"
#include "explain/blocks.h"
#include "explain/check.h"
#include "explain/explain_modes.h"
#include "explain/report_text.h"

enum { MATRIX_MAX_CELLS = 256 };   // larger matrices are drawn from every (T/256)-th cell

static FILE* gnuplot_open(void) {
    FILE* gp = popen("gnuplot", "w");
    CHECK(gp, "install gnuplot (tools/setup.sh)", "explain --png: cannot start gnuplot");
    return gp;
}

static void gnuplot_close(FILE* gp, const char* what) {
    const int status = pclose(gp);
    CHECK(status == 0, "see gnuplot's message above", "explain --png: gnuplot failed drawing %s (status %d)",
          what, status);
}

static void png_start(FILE* gp, const char* dir, const Simulation* sim, const char* name, int w, int h) {
    fprintf(gp, "set terminal pngcairo size %d,%d font 'sans,10'\n", w, h);
    fprintf(gp, "set output '%s/%s-%s.png'\n", dir, explain_algo_name(sim->s.algo), name);
}

static void draw_matrix(const Simulation* sim, const BlockMap* map, int by_step, const char* dir) {
    const long T = map->T, every = T > MATRIX_MAX_CELLS ? T / MATRIX_MAX_CELLS : 1;
    FILE* gp = gnuplot_open();
    png_start(gp, dir, sim, by_step ? "matrix-step" : "matrix-rank", 640, 600);
    fprintf(gp, "$cells << EOD\n");
    for (long q = 0; q < T; q += every) {
        for (long k = 0; k < T; k += every) {
            const int v = by_step ? map->step[(size_t)q * T + k] : map->owner[(size_t)q * T + k];
            if (v < 0) fprintf(gp, "%ld %ld NaN\n", k, q);
            else fprintf(gp, "%ld %ld %d\n", k, q, v);
        }
        fprintf(gp, "\n");
    }
    fprintf(gp, "EOD\n");
    fprintf(gp, "set title '%s, T = %ld, P = %d: %s (white: masked)'\n", explain_algo_title(sim->s.algo), T,
            sim->P, by_step ? "ring step computing each cell" : "rank computing each cell");
    fprintf(gp, "set xlabel 'key position'; set ylabel 'query position'\n");
    fprintf(gp, "set yrange [%ld:%ld] reverse; set xrange [%ld:%ld]\n", T - 0.5 > 0 ? T : 1, -1L, -1L, T);
    // One colour per rank or step: a step function over [0, n], cell value v drawn at v + 0.5.
    // n: the P ranks, or the steps up to the last that computes a cell (a ring stopped early runs
    // fewer than P).
    int n = sim->P;
    if (by_step) {
        n = 1;
        for (size_t x = 0; x < (size_t)T * T; x++)
            if (map->step[x] + 1 > n) n = map->step[x] + 1;
    }
    static const char* const colours[] = {"#4477aa", "#ee6677", "#228833", "#ccbb44",
                                          "#66ccee", "#aa3377", "#bbbbbb", "#000000"};
    fprintf(gp, "set palette defined (");
    for (int j = 0; j < n; j++)
        fprintf(gp, "%s%d '%s', %d '%s'", j ? ", " : "", j, colours[j % 8], j + 1, colours[j % 8]);
    fprintf(gp, ")\nset cbrange [0:%d]; set cblabel '%s' offset 1,0\n", n, by_step ? "step" : "rank");
    fprintf(gp, "set cbtics (");
    for (int j = 0; j < n; j += n > 16 ? n / 8 : 1) fprintf(gp, "%s'%d' %d.5", j ? ", " : "", j, j);
    fprintf(gp, ")\n");
    fprintf(gp, "set size square\n");
    fprintf(gp, "plot $cells using 1:2:($3 + 0.5) with image pixels notitle\n");
    gnuplot_close(gp, "the matrix");
}

// Where rank i is drawn: its mesh position (c, -r), or a circle for the ring family and Ulysses.
static void node_xy(const Simulation* sim, int i, double* x, double* y) {
    if (explain_algo_ignores_mesh(sim->s.algo)) {
        const double a = M_PI / 2 - 2 * M_PI * i / sim->P;
        *x = cos(a), *y = sin(a);
        return;
    }
    *x = sim->rank[i].mesh.c;
    *y = -sim->rank[i].mesh.r;
}

static void draw_nodes(FILE* gp, const Simulation* sim) {
    for (int i = 0; i < sim->P; i++) {
        double x, y;
        node_xy(sim, i, &x, &y);
        fprintf(gp, "set object circle at %g,%g size %g fc rgb '#ddeeff' fs solid border lc rgb '#4477aa' front\n",
                x, y, explain_algo_ignores_mesh(sim->s.algo) ? 0.18 : 0.2);
        fprintf(gp, "set label '%d' at %g,%g center front\n", i, x, y);
    }
}

static void set_frame(FILE* gp, const Simulation* sim) {
    if (explain_algo_ignores_mesh(sim->s.algo))
        fprintf(gp, "set xrange [-1.5:1.5]; set yrange [-1.5:1.5]\n");
    else
        fprintf(gp, "set xrange [-0.7:%g]; set yrange [%g:0.7]\n", sim->s.pkv - 0.3, -(sim->s.pq - 0.3));
    fprintf(gp, "unset xtics; unset ytics; unset border; unset key; set size ratio -1\n");
}

static void draw_mesh(const Simulation* sim, const char* dir) {
    FILE* gp = gnuplot_open();
    png_start(gp, dir, sim, "mesh", 560, 520);
    set_frame(gp, sim);
    if (sim->s.algo == ALGO_ULYSSES) {
        fprintf(gp, "set title 'all-to-all among %d ranks: each sends every other its tokens, for "
                    "that rank''s %d of the %d heads'\n", sim->P, sim->s.NH / sim->P, sim->s.NH);
        for (int i = 0; i < sim->P; i++)
            for (int j = i + 1; j < sim->P; j++) {
                double x0, y0, x1, y1;
                node_xy(sim, i, &x0, &y0);
                node_xy(sim, j, &x1, &y1);
                fprintf(gp, "set arrow from %g,%g to %g,%g nohead lc rgb '#cc3311' lw 1.5 back\n",
                        x0, y0, x1, y1);
            }
    } else if (explain_algo_is_ring(sim->s.algo)) {
        fprintf(gp, "set title 'ring of %d ranks: K|V travel to the next rank each step'\n", sim->P);
        for (int i = 0; i < sim->P; i++) {
            double x0, y0, x1, y1;
            node_xy(sim, i, &x0, &y0);
            node_xy(sim, (i + 1) % sim->P, &x1, &y1);
            fprintf(gp, "set arrow from %g,%g to %g,%g lc rgb '#cc3311' lw 2\n", x0 + 0.2 * (x1 - x0),
                    y0 + 0.2 * (y1 - y0), x1 - 0.2 * (x1 - x0), y1 - 0.2 * (y1 - y0));
        }
    } else {
        if (sim->s.algo == ALGO_USP)
            fprintf(gp, "set title '%d x %d mesh: SP index i = r + %d c; columns (blue) "
                        "all-to-all for heads, rows (red) a Striped ring'\n", sim->s.pq, sim->s.pkv,
                    sim->s.pq);
        else
            fprintf(gp, "set title '%d x %d mesh: SP index i = r + %d c; rows (red) gather Q, "
                        "columns (blue) K|V'\n", sim->s.pq, sim->s.pkv, sim->s.pq);
        for (int r = 0; r < sim->s.pq; r++)
            fprintf(gp, "set arrow from %g,%d to %g,%d nohead lc rgb '#cc3311' lw 6 back\n", -0.4, -r,
                    sim->s.pkv - 0.6, -r);
        for (int c = 0; c < sim->s.pkv; c++)
            fprintf(gp, "set arrow from %d,%g to %d,%g nohead lc rgb '#4477aa' lw 2 dt 2 back\n", c, 0.4, c,
                    -(sim->s.pq - 0.6));
    }
    draw_nodes(gp, sim);
    fprintf(gp, "plot NaN notitle\n");
    gnuplot_close(gp, "the mesh");
}

// One panel per aligned step of a phase: arrows sender -> receiver (collectives: every pair of
// group members, both ways).
static void draw_transfers(const Simulation* sim, CommPhase phase, const char* dir) {
    int nsteps;
    Step* steps = align_steps(sim, phase, &nsteps);
    if (!nsteps) {
        steps_free(steps, nsteps);
        return;
    }
    const int shown = nsteps > 12 ? 12 : nsteps, cols = shown < 4 ? shown : 4, rows = (shown + cols - 1) / cols;
    FILE* gp = gnuplot_open();
    png_start(gp, dir, sim, phase == COMM_FORWARD ? "transfers-forward" : "transfers-backward", 300 * cols,
              300 * rows + 40);
    fprintf(gp, "set multiplot layout %d,%d title '%s %s: one panel per step, arrows from sender to receiver%s'\n",
            rows, cols, explain_algo_title(sim->s.algo), comm_phase_name(phase),
            nsteps > shown ? " (first 12 steps)" : "");
    for (int s = 0; s < shown; s++) {
        const Step* st = &steps[s];
        fprintf(gp, "reset; unset arrow; unset label; unset object\n");
        set_frame(gp, sim);
        long long bytes = 0;
        for (int i = 0; i < sim->P; i++) {
            if (st->op[i] < 0) continue;
            const RankRun* r = &sim->rank[i];
            const RecordedOp* op = &r->op[st->op[i]];
            bytes = op->bytes > bytes ? op->bytes : bytes;
            const int n = op->kind == COMM_SEND_RECV ? op->nrecv : op->group_size;
            for (int t = 0; t < n; t++) {
                const int from = record_sp_index(&r->mesh, op->group,
                                                 op->kind == COMM_SEND_RECV ? op->recv_peer[t] : t);
                if (from == i) continue;
                double x0, y0, x1, y1;
                node_xy(sim, from, &x0, &y0);
                node_xy(sim, i, &x1, &y1);
                const double dx = x1 - x0, dy = y1 - y0, len = sqrt(dx * dx + dy * dy);
                const double ox = -dy / len * 0.06, oy = dx / len * 0.06;   // two-way pairs side by side
                fprintf(gp, "set arrow from %g,%g to %g,%g lc rgb '#cc3311' lw 1.5\n", x0 + 0.22 * dx / len + ox,
                        y0 + 0.22 * dy / len + oy, x1 - 0.22 * dx / len + ox, y1 - 0.22 * dy / len + oy);
            }
        }
        fprintf(gp, "set title '%d: %s %s %s, %lld B per rank'\n", s + 1, dist_stage_name(st->stage),
                comm_kind_name(st->kind), mesh_group_name(st->group), bytes);
        draw_nodes(gp, sim);
        fprintf(gp, "plot NaN notitle\n");
    }
    fprintf(gp, "unset multiplot\n");
    steps_free(steps, nsteps);
    gnuplot_close(gp, "the transfers");
}

// Busiest rank's forward + backward bytes of one schedule.
static long long busiest_bytes(const ExplainShape* s) {
    Simulation* sim = simulate(s);
    long long most = 0;
    for (int i = 0; i < sim->P; i++) {
        const long long b = rank_bytes(&sim->rank[i], COMM_FORWARD) + rank_bytes(&sim->rank[i], COMM_BACKWARD);
        most = b > most ? b : most;
    }
    simulation_free(sim);
    return most;
}

static void draw_bytes_vs_p(const Simulation* sim, const char* dir) {
    static const int side[] = {1, 2, 3, 4, 6, 8};   // P = side^2; T = 576 splits over each
    const long T = 576 * ((sim->s.T + 575) / 576);
    FILE* gp = gnuplot_open();
    png_start(gp, dir, sim, "bytes-vs-p", 720, 480);
    fprintf(gp, "$bytes << EOD\n");
    for (size_t k = 0; k < sizeof side / sizeof *side; k++) {
        ExplainShape s = sim->s;
        s.dp = 1, s.T = T, s.pq = s.pkv = side[k];
        s.algo = ALGO_2D;
        const long long a2d = busiest_bytes(&s);
        s.algo = ALGO_RING;
        const long long ring = busiest_bytes(&s);
        s.algo = ALGO_STRIPED;
        const long long striped = busiest_bytes(&s);
        fprintf(gp, "%d %lld %lld %lld\n", side[k] * side[k], a2d, ring, striped);
    }
    fprintf(gp, "EOD\n");
    fprintf(gp, "set title 'bytes the busiest rank receives per layer (forward + backward), T = %ld, B = %d, NH = %d, HS = %d'\n",
            T, sim->s.B, sim->s.NH, sim->s.HS);
    fprintf(gp, "set xlabel 'P (ATTENTION2D: sqrt(P) x sqrt(P))'; set ylabel 'bytes'; set logscale x 2; set key top left\n");
    fprintf(gp, "set xrange [0.8:80]; set grid\n");
    fprintf(gp, "plot $bytes using 1:2 with linespoints lw 2 pt 7 lc rgb '#4477aa' title 'ATTENTION2D', "
                "'' using 1:3 with linespoints lw 2 pt 5 lc rgb '#cc3311' title 'Ring', "
                "'' using 1:4 with linespoints lw 2 pt 9 dt 2 lc rgb '#228833' title 'Striped (same volume as Ring)'\n");
    gnuplot_close(gp, "bytes against P");
}

void explain_pictures(const Simulation* sim, const char* dir) {
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "create the directory first",
          "explain --png %s: not a directory", dir);
    char err[ERR_LEN];
    BlockMap map;
    CHECK(block_map_build(sim, COMM_FORWARD, &map, err) == 0, "a schedule bug", "%s", err);
    // Ulysses and USP: each cell by several ranks, each for its own heads
    if (sim->s.algo != ALGO_ULYSSES && sim->s.algo != ALGO_USP) draw_matrix(sim, &map, 0, dir);
    if (explain_algo_is_ring(sim->s.algo)) draw_matrix(sim, &map, 1, dir);
    block_map_free(&map);
    draw_mesh(sim, dir);
    draw_transfers(sim, COMM_FORWARD, dir);
    draw_transfers(sim, COMM_BACKWARD, dir);
    draw_bytes_vs_p(sim, dir);
}
