// The shim's launcher: a registry of kernels by name, and a launch that runs a grid block
// after block, each block's blockDim.x*y*z threads as fibers on the launching thread (as
// OS threads on CPUs other than x86-64). See cuda_shim.h for what it maps and its limits.
//
// Why two ways: a barrier over a block's hundreds of OS threads on a few cores costs the
// kernel scheduler hundreds of switches, and the test kernels spent over 90 % of their time
// there. Fibers switch in user space (six registers and the stack pointer, x86-64 only),
// and a barrier then costs one switch per thread. The sanitizers are told of each switch;
// ThreadSanitizer sees each fiber as a thread, ordered only by the block's barriers (and
// the kernels' atomics), so a missing barrier is still a race to it. Other CPUs keep one
// OS thread per CUDA thread (TESSERA_SHIM_OS_THREADS).
#include "cuda_shim.h"

#if !defined(__x86_64__) && !defined(TESSERA_SHIM_OS_THREADS)
#define TESSERA_SHIM_OS_THREADS
#endif

#include <map>
#include <memory>
#include <mutex>
#include <string>
#ifdef TESSERA_SHIM_OS_THREADS
#include <barrier>
#include <pthread.h>
#else
#include <sys/mman.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define TESSERA_SHIM_ASAN_FIBERS 1
#endif
#ifdef TESSERA_SHIM_TSAN_FIBERS
#include <sanitizer/tsan_interface.h>
#endif

// Saves the callee-saved registers on the current stack, stores its pointer in *save, and
// resumes the stack at `load` (saved by an earlier switch, or made by new_fiber_stack).
extern "C" void tessera_shim_switch(void** save, void* load);
asm(R"(
    .text
    .p2align 4
    .type tessera_shim_switch, @function
tessera_shim_switch:
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
    .size tessera_shim_switch, .-tessera_shim_switch
)");
#endif

namespace shim {
thread_local uint3 thread_idx;
thread_local uint3 block_idx;
dim3 block_dim;
dim3 grid_dim;
unsigned char* dynamic_shared = nullptr;

namespace {
std::map<std::string, Entry>& registry() {
    static std::map<std::string, Entry> r;
    return r;
}

#ifdef TESSERA_SHIM_OS_THREADS
using Barrier = std::barrier<>;
#else
// The fibers of the block being run, and the scheduler's stack they return to.
struct Fiber {
    void* stack_pointer = nullptr;
    bool done = false;
    char* stack = nullptr;  // its lowest byte (for AddressSanitizer)
    void* fake_stack = nullptr;
    void* tsan_fiber = nullptr;  // ThreadSanitizer's thread for it
};
// A fiber's stack: 1 MiB (an OS thread's here), reserved but only touched pages held.
constexpr size_t fiber_stack = size_t(1) << 20;
Fiber* fibers = nullptr;
unsigned current = 0;
void* scheduler = nullptr;
#ifdef TESSERA_SHIM_ASAN_FIBERS
const void* scheduler_stack = nullptr;
size_t scheduler_stack_size = 0;
#endif
// Whether the fiber that last yielded had nothing to do (it waits on a closed barrier).
bool stalled = false;

// What ThreadSanitizer is told (nothing without it). A switch passes no ordering between
// fibers, except into a fiber at the start of a block, which sees what came before the
// block. A barrier phase orders every arrival before every departure; a block's end orders
// all its threads before what follows it.
char block_end;
#ifdef TESSERA_SHIM_TSAN_FIBERS
void* scheduler_tsan_fiber = nullptr;
void tsan_switch(void* fiber, bool ordered) { __tsan_switch_to_fiber(fiber, ordered ? 0 : __tsan_switch_to_fiber_no_sync); }
void tsan_release(void* token) { __tsan_release(token); }
void tsan_acquire(void* token) { __tsan_acquire(token); }
#else
inline void tsan_release(void*) {}
inline void tsan_acquire(void*) {}
#endif

// From the scheduler into fiber `t`, until it yields or ends; `first` at the block's start.
void enter_fiber(unsigned t, bool first) {
#ifdef TESSERA_SHIM_TSAN_FIBERS
    tsan_switch(fibers[t].tsan_fiber, first);
#endif
    (void)first;
#ifdef TESSERA_SHIM_ASAN_FIBERS
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, fibers[t].stack, fiber_stack);
#endif
    tessera_shim_switch(&scheduler, fibers[t].stack_pointer);
#ifdef TESSERA_SHIM_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

// The first thing a fiber does: takes note of the scheduler's stack it came from.
void fiber_started() {
#ifdef TESSERA_SHIM_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack, &scheduler_stack_size);
#endif
}

// From the current fiber back to the scheduler; `for_good` when the fiber has ended.
void leave_fiber(bool for_good) {
    Fiber& f = fibers[current];
#ifdef TESSERA_SHIM_TSAN_FIBERS
    if (for_good) tsan_release(&block_end);
    tsan_switch(scheduler_tsan_fiber, false);
#endif
#ifdef TESSERA_SHIM_ASAN_FIBERS
    __sanitizer_start_switch_fiber(for_good ? nullptr : &f.fake_stack, scheduler_stack, scheduler_stack_size);
#endif
    tessera_shim_switch(&f.stack_pointer, scheduler);
#ifdef TESSERA_SHIM_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(f.fake_stack, &scheduler_stack, &scheduler_stack_size);
#endif
    (void)for_good;
}

void yield(bool nothing_done) {
    stalled = nothing_done;
    leave_fiber(false);
}

// A barrier between fibers: the last arrival opens the phase; the others yield until it
// opens (the scheduler resumes each in turn).
class Barrier {
public:
    explicit Barrier(unsigned expected) : expected_(expected) {}
    void arrive_and_wait() {
        unsigned phase = phase_;
        tsan_release(token(phase));
        if (++arrived_ == expected_) {
            open();
        } else {
            bool arrived_just_now = true;
            while (phase_ == phase) {
                yield(!arrived_just_now);
                arrived_just_now = false;
            }
        }
        tsan_acquire(token(phase));
    }
    // Leaves the barrier for this phase and the next ones (a thread that returned).
    void arrive_and_drop() {
        tsan_release(token(phase_));
        --expected_;
        if (arrived_ == expected_) open();
    }

private:
    void open() {
        arrived_ = 0;
        ++phase_;
    }
    // The phase's token for ThreadSanitizer: two alternate, since a phase's waiters have
    // all left before the phase after next can open, but not always before the next one.
    void* token(unsigned phase) { return &tokens_[phase & 1]; }
    unsigned expected_;
    unsigned arrived_ = 0;
    unsigned phase_ = 0;
    char tokens_[2] = {};
};
#endif

// One warp's meeting point: a barrier over its live lanes and one slot per lane.
struct Warp {
    std::unique_ptr<Barrier> barrier;
    uint64_t slot[32];
};

// The state of the block being run.
struct Block {
    std::unique_ptr<Barrier> sync;       // __syncthreads, left by returning threads
    std::unique_ptr<Barrier> end;        // every OS thread, at the end of a block
    std::unique_ptr<Warp[]> warps;
    unsigned threads = 0;
    void arm() {
        sync = std::make_unique<Barrier>(threads);
        unsigned nwarps = (threads + 31) / 32;
        for (unsigned w = 0; w < nwarps; ++w) {
            unsigned lanes = std::min(32u, threads - 32 * w);
            warps[w].barrier = std::make_unique<Barrier>(lanes);
        }
    }
};
Block block;
thread_local unsigned linear_tid;

}  // namespace

Registrar::Registrar(const char* name, Entry entry) { registry()[name] = entry; }

void sync_threads() { block.sync->arrive_and_wait(); }
unsigned lane() { return linear_tid & 31; }
void sync_warp() { block.warps[linear_tid / 32].barrier->arrive_and_wait(); }

uint64_t warp_exchange(uint64_t value, unsigned src) {
    Warp& w = block.warps[linear_tid / 32];
    w.slot[lane()] = value;
    w.barrier->arrive_and_wait();
    uint64_t got = w.slot[src & 31];
    w.barrier->arrive_and_wait();
    return got;
}

uint32_t warp_ballot(bool value) {
    Warp& w = block.warps[linear_tid / 32];
    w.slot[lane()] = value ? 1 : 0;
    w.barrier->arrive_and_wait();
    uint32_t bits = 0;
    unsigned lanes = std::min(32u, block.threads - 32 * (linear_tid / 32));
    for (unsigned l = 0; l < lanes; ++l) bits |= uint32_t(w.slot[l] != 0) << l;
    w.barrier->arrive_and_wait();
    return bits;
}
}  // namespace shim

namespace {
std::mutex launch_lock;

// Makes the calling thread (or the fiber about to run) the block's thread `tid`.
void become_thread(unsigned tid) {
    using namespace shim;
    linear_tid = tid;
    thread_idx = {tid % block_dim.x, (tid / block_dim.x) % block_dim.y, tid / (block_dim.x * block_dim.y)};
}

// Leaves the block's barriers, so threads still running are not held.
void leave_block(unsigned tid) {
    shim::block.sync->arrive_and_drop();
    shim::block.warps[tid / 32].barrier->arrive_and_drop();
}

#ifdef TESSERA_SHIM_OS_THREADS
struct Worker {
    shim::Entry entry;
    void** args;
    unsigned tid;
    std::atomic<int>* go;  // 0: wait, 1: run, -1: leave (not every thread could start)
};

void run_blocks(const Worker& w) {
    using namespace shim;
    become_thread(w.tid);
    for (unsigned bz = 0; bz < grid_dim.z; ++bz)
        for (unsigned by = 0; by < grid_dim.y; ++by)
            for (unsigned bx = 0; bx < grid_dim.x; ++bx) {
                block_idx = {bx, by, bz};
                w.entry(w.args);
                leave_block(w.tid);
                block.end->arrive_and_wait();
                if (w.tid == 0) block.arm();
                block.end->arrive_and_wait();
            }
}

void* worker_main(void* p) {
    auto* w = static_cast<Worker*>(p);
    w->go->wait(0);
    if (w->go->load() == 1) run_blocks(*w);
    return nullptr;
}

// One OS thread per CUDA thread, all blocks in turn; 0, or 3 when threads cannot start.
int run_grid(shim::Entry entry, void** args, unsigned threads) {
    using namespace shim;
    block.end = std::make_unique<Barrier>(threads);
    std::unique_ptr<Worker[]> workers(new Worker[threads]);
    std::unique_ptr<pthread_t[]> ids(new pthread_t[threads]);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    std::atomic<int> go{0};
    unsigned started = 0;
    int rc = 0;
    for (; started < threads; ++started) {
        workers[started] = {entry, args, started, &go};
        if (pthread_create(&ids[started], &attr, worker_main, &workers[started]) != 0) {
            rc = 3;
            break;
        }
    }
    pthread_attr_destroy(&attr);
    // Only a whole block may run: with a thread missing, the others would wait forever.
    go.store(rc == 0 ? 1 : -1);
    go.notify_all();
    for (unsigned t = 0; t < started; ++t) pthread_join(ids[t], nullptr);
    return rc;
}
#else
shim::Entry fiber_entry;
void** fiber_args;

// A fiber's whole life: the kernel, then back to the scheduler for good.
[[noreturn]] void fiber_main() {
    shim::fiber_started();
    fiber_entry(fiber_args);
    leave_block(shim::current);
    shim::fibers[shim::current].done = true;
    shim::leave_fiber(true);
    __builtin_unreachable();
}

// The stack pointer of a fiber that has not run, in [base, base + size): the first switch
// to it pops six zero registers and "returns" into fiber_main, with the stack aligned as
// after a call.
void* new_fiber_stack(char* base, size_t size) {
    auto* top = reinterpret_cast<void**>(reinterpret_cast<uintptr_t>(base + size) & ~uintptr_t(15));
    *--top = nullptr;  // fiber_main's own return address: it never returns
    *--top = reinterpret_cast<void*>(&fiber_main);
    for (int r = 0; r < 6; ++r) *--top = nullptr;
    return top;
}

// The fibers' stacks (each with a guard page below it) and, under ThreadSanitizer, their
// threads, kept from one launch to the next and grown to the largest block yet: mapping
// the stacks per launch made every launch fault their pages in afresh, and under the
// sanitizers cost a shadow reset of the whole range at each unmap, more than many kernels'
// work. A block's fibers reuse them as the blocks of one launch always have.
struct FiberPool {
    char* mem = nullptr;
    unsigned capacity = 0;
    std::unique_ptr<shim::Fiber[]> fibers;
};
FiberPool pool;
const size_t page = size_t(sysconf(_SC_PAGESIZE)), slot = shim::fiber_stack + page;

// The base of fiber `t`'s stack.
char* stack_base(unsigned t) { return pool.mem + t * slot + page; }

// Grows the pool to `threads` fibers; false when their stacks cannot be mapped.
bool reserve_fibers(unsigned threads) {
    if (threads <= pool.capacity) return true;
    void* mem = mmap(nullptr, slot * threads, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return false;
    for (unsigned t = 0; t < threads; ++t)
        if (mprotect(static_cast<char*>(mem) + t * slot, page, PROT_NONE) != 0) {
            munmap(mem, slot * threads);
            return false;
        }
    std::unique_ptr<shim::Fiber[]> grown(new shim::Fiber[threads]);
    for (unsigned t = 0; t < threads; ++t) grown[t].tsan_fiber = t < pool.capacity ? pool.fibers[t].tsan_fiber : nullptr;
#ifdef TESSERA_SHIM_TSAN_FIBERS
    for (unsigned t = pool.capacity; t < threads; ++t) grown[t].tsan_fiber = __tsan_create_fiber(0);
#endif
    if (pool.mem) munmap(pool.mem, slot * pool.capacity);
    pool = {static_cast<char*>(mem), threads, std::move(grown)};
    return true;
}

// Each block's threads as fibers, resumed in turn until all return; 0, 3 when their stacks
// cannot be mapped, 4 when every live thread waits on a barrier the others never reach
// (a kernel that would hang on the GPU).
int run_grid(shim::Entry entry, void** args, unsigned threads) {
    using namespace shim;
    if (!reserve_fibers(threads)) return 3;
    fibers = pool.fibers.get();
#ifdef TESSERA_SHIM_TSAN_FIBERS
    scheduler_tsan_fiber = __tsan_get_current_fiber();
#endif
    fiber_entry = entry;
    fiber_args = args;
    int rc = 0;
    for (unsigned bz = 0; bz < grid_dim.z && rc == 0; ++bz)
        for (unsigned by = 0; by < grid_dim.y && rc == 0; ++by)
            for (unsigned bx = 0; bx < grid_dim.x && rc == 0; ++bx) {
                block_idx = {bx, by, bz};
                for (unsigned t = 0; t < threads; ++t) {
                    char* base = stack_base(t);
                    fibers[t] = {new_fiber_stack(base, fiber_stack), false, base, nullptr, fibers[t].tsan_fiber};
                }
                for (unsigned live = threads, round = 0; live > 0 && rc == 0; ++round) {
                    bool progress = false, first_round = round == 0;
                    for (unsigned t = 0; t < threads; ++t) {
                        if (fibers[t].done) continue;
                        current = t;
                        become_thread(t);
                        stalled = false;
                        enter_fiber(t, first_round);
                        progress |= !stalled;
                        live -= fibers[t].done;
                    }
                    if (!progress) rc = 4;
                }
                tsan_acquire(&block_end);
                if (rc == 0) block.arm();
            }
    fibers = nullptr;
#ifdef TESSERA_SHIM_ASAN_FIBERS
    // Fibers left waiting on a barrier never unwound their frames' red zones.
    if (rc != 0) ASAN_UNPOISON_MEMORY_REGION(pool.mem, slot * pool.capacity);
#endif
    return rc;
}
#endif
}  // namespace

// Runs kernel `name` over the grid; returns 0, or 1 for an unknown kernel, 2 for a launch
// shape the shim refuses, 3 when the threads cannot be started, 4 when the block's threads
// wait on barriers that never open. One launch at a time.
extern "C" int tessera_shim_launch(const char* name, const unsigned grid[3], const unsigned blockdim[3],
                                   unsigned shared_bytes, void** args) {
    using namespace shim;
    auto it = registry().find(name);
    if (it == registry().end()) return 1;
    unsigned threads = blockdim[0] * blockdim[1] * blockdim[2];
    if (threads == 0 || threads > 1024 || grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return 2;
    std::lock_guard<std::mutex> guard(launch_lock);
    block_dim = dim3(blockdim[0], blockdim[1], blockdim[2]);
    grid_dim = dim3(grid[0], grid[1], grid[2]);
    std::unique_ptr<unsigned char[]> smem(shared_bytes ? new unsigned char[shared_bytes]() : nullptr);
    dynamic_shared = smem.get();
    block.threads = threads;
    block.warps = std::make_unique<Warp[]>((threads + 31) / 32);
    block.arm();
    int rc = run_grid(it->second, args, threads);
    dynamic_shared = nullptr;
    return rc;
}

// 1 if a kernel of that name is registered.
extern "C" int tessera_shim_has(const char* name) { return shim::registry().count(name) ? 1 : 0; }
