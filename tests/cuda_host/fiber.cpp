// Fiber stacks and context switches for the block scheduler (see internal.h).
#include "tests/cuda_host/internal.h"
#include "comm/fail.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(CUDA_HOST_FIBER_UCONTEXT) || !defined(__x86_64__)
#define USE_UCONTEXT 1
#include <ucontext.h>
typedef ucontext_t Context;
#else
typedef struct {
    void* sp;  // the suspended fiber's stack pointer; its registers are saved on its stack
} Context;

// void cuda_host_switch_sp(void** save_sp, void* load_sp): pushes the callee-saved registers,
// saves rsp, loads the other stack and pops the same frame from it. The SSE and x87 control words
// are not switched (reloading them costs more than the rest): all fibers of an OS thread share
// its rounding and flush-to-zero modes, which kernels do not change.
extern "C" void cuda_host_switch_sp(void** save_sp, void* load_sp);
asm(R"(
    .text
    .globl cuda_host_switch_sp
    .hidden cuda_host_switch_sp
    .type cuda_host_switch_sp, @function
    .p2align 4
cuda_host_switch_sp:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuda_host_switch_sp, .-cuda_host_switch_sp
)");
#endif

struct CudaHostFibers {
    char* map;
    size_t map_bytes;
    size_t slot_bytes;   // guard page + stack + STACK_COLORS * 64 bytes
    size_t page;
    int n;
    Context ctx[1];      // n + 1 entries; [n] is the scheduler
};

// Fiber i's stack starts (i % STACK_COLORS) * 64 bytes below the top of its slot. Slots are a
// multiple of 4 KiB apart, so without this every fiber's top frames (the registers a switch saves
// and restores) would fall in the same few L1 sets: a block's 128 to 384 fibers took turns
// evicting each other at every warp round.
enum { STACK_COLORS = 64 };

CudaHostFibers* cuda_host_fibers_create(int n, size_t stack_bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t stack = (stack_bytes + page - 1) / page * page;
    CudaHostFibers* f = (CudaHostFibers*)xcalloc(1, sizeof *f + (size_t)n * sizeof(Context),
                                                 "fiber contexts");
    f->n = n;
    f->page = page;
    f->slot_bytes = page + stack + (STACK_COLORS * 64 + page - 1) / page * page;
    f->map_bytes = f->slot_bytes * (size_t)n;
    void* map = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(map != MAP_FAILED, "lower CUDA_HOST_STACK_KB or the block size",
          "mmap of %d fiber stacks of %zu bytes failed: %s", n, stack, strerror(errno));
    f->map = (char*)map;
    for (int i = 0; i < n; i++)
        CHECK(mprotect(f->map + (size_t)i * f->slot_bytes, page, PROT_NONE) == 0, "",
              "mprotect of a fiber guard page failed: %s", strerror(errno));
    return f;
}

void cuda_host_fibers_destroy(CudaHostFibers* f) {
    if (!f) return;
    CHECK(munmap(f->map, f->map_bytes) == 0, "", "munmap of fiber stacks failed: %s", strerror(errno));
    free(f);
}

int cuda_host_fibers_guard_hit(const CudaHostFibers* f, const void* addr) {
    const char* a = (const char*)addr;
    if (!f || a < f->map || a >= f->map + f->map_bytes) return 0;
    return (size_t)(a - f->map) % f->slot_bytes < f->page;
}

void cuda_host_fiber_init(CudaHostFibers* f, int i, void (*entry)(void)) {
    char* stack = f->map + (size_t)i * f->slot_bytes + f->page;
    size_t bytes = f->slot_bytes - f->page - (size_t)(i % STACK_COLORS) * 64;
#ifdef USE_UCONTEXT
    Context* c = &f->ctx[i];
    CHECK(getcontext(c) == 0, "", "getcontext failed: %s", strerror(errno));
    c->uc_stack.ss_sp = stack;
    c->uc_stack.ss_size = bytes;
    c->uc_link = NULL;
    makecontext(c, entry, 0);
#else
    // The frame cuda_host_switch_sp pops: r15..rbp, then `ret` into entry with rsp = top - 8, the
    // alignment a called function expects; 0 is entry's (unused) return address.
    uint64_t* sp = (uint64_t*)(stack + bytes);
    *--sp = 0;
    *--sp = (uint64_t)(uintptr_t)entry;
    for (int r = 0; r < 6; r++) *--sp = 0;
    f->ctx[i].sp = sp;
#endif
}

void cuda_host_fiber_switch(CudaHostFibers* f, int from, int to) {
#ifdef USE_UCONTEXT
    CHECK(swapcontext(&f->ctx[from], &f->ctx[to]) == 0, "", "swapcontext failed: %s", strerror(errno));
#else
    cuda_host_switch_sp(&f->ctx[from].sp, f->ctx[to].sp);
#endif
}
