// The shim's launcher: a registry of kernels by name, and a launch that runs a grid block
// after block on blockDim.x*y*z OS threads. See cuda_shim.h for what it maps and its limits.
#include "cuda_shim.h"

#include <barrier>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <pthread.h>

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

// One warp's meeting point: a barrier over its live lanes and one slot per lane.
struct Warp {
    std::unique_ptr<std::barrier<>> barrier;
    uint64_t slot[32];
};

// The state of the block being run.
struct Block {
    std::unique_ptr<std::barrier<>> sync;       // __syncthreads, left by returning threads
    std::unique_ptr<std::barrier<>> end;        // every thread, at the end of a block
    std::unique_ptr<Warp[]> warps;
    unsigned threads = 0;
    void arm() {
        sync = std::make_unique<std::barrier<>>(threads);
        unsigned nwarps = (threads + 31) / 32;
        for (unsigned w = 0; w < nwarps; ++w) {
            unsigned lanes = std::min(32u, threads - 32 * w);
            warps[w].barrier = std::make_unique<std::barrier<>>(lanes);
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
struct Worker {
    shim::Entry entry;
    void** args;
    unsigned tid;
    std::atomic<int>* go;  // 0: wait, 1: run, -1: leave (not every thread could start)
};

void run_blocks(const Worker& w) {
    using namespace shim;
    linear_tid = w.tid;
    thread_idx = {w.tid % block_dim.x, (w.tid / block_dim.x) % block_dim.y, w.tid / (block_dim.x * block_dim.y)};
    for (unsigned bz = 0; bz < grid_dim.z; ++bz)
        for (unsigned by = 0; by < grid_dim.y; ++by)
            for (unsigned bx = 0; bx < grid_dim.x; ++bx) {
                block_idx = {bx, by, bz};
                w.entry(w.args);
                // Leave the block's barriers, so threads still running are not held.
                block.sync->arrive_and_drop();
                block.warps[w.tid / 32].barrier->arrive_and_drop();
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
std::mutex launch_lock;
}  // namespace

// Runs kernel `name` over the grid; returns 0, or 1 for an unknown kernel, 2 for a launch
// shape the shim refuses, 3 when threads cannot be started. One launch at a time.
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
    block.end = std::make_unique<std::barrier<>>(threads);
    block.arm();

    std::unique_ptr<Worker[]> workers(new Worker[threads]);
    std::unique_ptr<pthread_t[]> ids(new pthread_t[threads]);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    std::atomic<int> go{0};
    unsigned started = 0;
    int rc = 0;
    for (; started < threads; ++started) {
        workers[started] = {it->second, args, started, &go};
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
    dynamic_shared = nullptr;
    return rc;
}

// 1 if a kernel of that name is registered.
extern "C" int tessera_shim_has(const char* name) { return shim::registry().count(name) ? 1 : 0; }
