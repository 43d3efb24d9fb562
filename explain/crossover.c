// Exercise: from which P does ATTENTION2D move fewer bytes per rank than Ring? For P = 1..64
// every mesh pq x pkv = P is simulated (the busiest rank of each), the best mesh kept (the table names the best for forward + backward), and
// compared with Ring's busiest rank, forward and forward + backward. Bytes scale with B*T, so a
// short sequence (T = P) answers for any length; heads and head size change the LSE share.
#include "comm/fail.h"
#include "explain/explain_modes.h"

enum { MAX_P = 16 };

// Busiest rank's bytes of one simulated schedule: forward, and forward + backward.
static void busiest(const ExplainShape* s, long long* fwd, long long* both) {
    Simulation* sim = simulate(s);
    *fwd = *both = 0;
    for (int i = 0; i < sim->P; i++) {
        const long long f = rank_bytes(&sim->rank[i], COMM_FORWARD);
        const long long b = f + rank_bytes(&sim->rank[i], COMM_BACKWARD);
        *fwd = f > *fwd ? f : *fwd;
        *both = b > *both ? b : *both;
    }
    simulation_free(sim);
}

int explain_crossover(const ExplainShape* base, FILE* out) {
    int first[2] = {0, 0};   // smallest P where ATTENTION2D moves less: forward, forward + backward
    fprintf(out, "bytes the busiest rank receives per layer and token of its own (B = 1, T = P), NH = %d, HS = %d\n",
            base->NH, base->HS);
    fprintf(out, "  %3s  %-9s %12s %14s %14s %14s\n", "P", "2d mesh", "2d forward", "ring forward",
            "2d fwd+bwd", "ring fwd+bwd");
    for (int P = 2; P <= MAX_P; P++) {
        ExplainShape s = *base;
        s.dp = 1, s.B = 1, s.T = P;
        long long best[2] = {-1, -1}, ring[2];
        int best_pq = 0;
        for (int pq = 1; pq <= P; pq++) {
            if (P % pq) continue;
            s.algo = ALGO_2D, s.pq = pq, s.pkv = P / pq;
            long long f, b;
            busiest(&s, &f, &b);
            if (best[1] < 0 || b < best[1]) best_pq = pq;
            best[0] = best[0] < 0 || f < best[0] ? f : best[0];
            best[1] = best[1] < 0 || b < best[1] ? b : best[1];
        }
        s.algo = ALGO_RING, s.pq = 1, s.pkv = P;
        busiest(&s, &ring[0], &ring[1]);
        for (int k = 0; k < 2; k++)
            if (!first[k] && best[k] < ring[k]) first[k] = P;
        fprintf(out, "  %3d  %2dx%-6d %12lld %14lld %14lld %14lld\n", P, best_pq, P / best_pq, best[0],
                    ring[0], best[1], ring[1]);
    }
    fprintf(out, "ATTENTION2D moves fewer bytes than Ring from P = %d (forward), P = %d (forward + backward)\n",
            first[0], first[1]);
    return first[0] && first[1] ? 0 : 1;
}
