// The checkpoint directory: per step S, model_S.bin (llm.c model file, rank 0), one
// state_S_R.bin per rank, and DONE_S, written by rank 0 only after every rank has written its
// state, so a checkpoint counts as complete only once DONE_S exists. Steps are zero-padded to 8
// digits and ranks to 5, as llm.c names them.
#pragma once
#include <stddef.h>

void checkpoint_model_path(const char* dir, int step, char* out, size_t n);
void checkpoint_state_path(const char* dir, int step, int rank, char* out, size_t n);
void checkpoint_done_path(const char* dir, int step, char* out, size_t n);

// Creates dir (and parents) if missing. Returns 0, or -1 with err set.
int checkpoint_make_dir(const char* dir, char* err, size_t errlen);
// Writes DONE_S atomically. Returns 0, or -1 with err set.
int checkpoint_mark_done(const char* dir, int step, char* err, size_t errlen);
// Steps that have a DONE file, newest first (at most max). Returns how many were found.
int checkpoint_complete_steps(const char* dir, int* steps, int max);
// Removes every file of one step: DONE first, then the model file, the state files and any
// temporary files an interrupted write left behind (NAME.tmp.PID).
void checkpoint_remove_step(const char* dir, int step);
// Removes every checkpoint except the newest keep_last complete ones and those whose step is
// a multiple of keep_every (> 0), plus files of steps older than the newest complete one that
// never completed. The DONE file goes first, so a half-removed checkpoint is never "complete".
void checkpoint_prune(const char* dir, int keep_last, int keep_every);
