// The trainer: one training loop for one process or many (mpirun). World = dp x pq x pkv
// ranks; each data-parallel group reads its own sequences, each sequence-parallel group of
// P = pq x pkv ranks holds T/P tokens of every sequence in its attention schedule's layout.
// This file is the outline of a run; its parts are in the files train/trainer.h names.
#include <string.h>

#include "model/blas_kernels.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
    blas_ensure_vector_kernels(argv);
    int world_rank, world_size;
    Trainer t;
    memset(&t, 0, sizeof t);
    // Where this process sits in the job (MPI, or a rendezvous file or socket), and the options.
    const int parsed = launch_run(&t, &argc, &argv, &world_rank, &world_size);
    if (parsed != 0) {
        end_launch();
        return parsed > 0 ? 0 : 2;
    }
    // The configuration (checked alike on every rank), mesh, transport, data, attention layer,
    // model, optimizer, timeline, sampler and output directory.
    setup_run(&t, world_rank, world_size);
    if (t.opt.resume) resume(&t);
    open_log(&t);
    print_config(&t);
    catch_stop_signals();
    if (t.opt.eval_only)
        eval_only(&t);
    else
        train_loop(&t);   // steps, evaluation, samples, checkpoints; the summary and last checkpoint
    shut_down(&t);
    end_launch();
    return 0;
}
