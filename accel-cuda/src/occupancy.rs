//! Theoretical occupancy of a kernel launch on an NVIDIA GPU from the kernel's resources
//! (registers per thread and static shared memory, as ptxas reports them) and the launch
//! shape (threads per block, dynamic shared memory, blocks): how many blocks fit on one SM
//! at once, the share of the SM's warp slots they fill, and how many waves the grid takes
//! over the GPU's SMs. The rules are those of NVIDIA's occupancy calculator.

/// What bounds residency on one SM of a GPU generation, and how many SMs it has.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmLimits {
    pub name: &'static str,
    pub sms: u32,
    pub max_warps: u32,
    pub max_blocks: u32,
    pub registers: u32,
    /// Registers are allocated per warp in units of this many.
    pub register_unit: u32,
    pub shared_bytes: u32,
    /// Shared memory is allocated per block in units of this many bytes, plus a reserve the
    /// system keeps per block.
    pub shared_unit: u32,
    pub shared_reserved: u32,
}

/// An H100 SXM (compute capability 9.0): 132 SMs, 64 warps, 32 blocks, 64 K registers
/// and 228 KiB of shared memory each, 1 KiB of it reserved per block.
pub const H100: SmLimits = SmLimits {
    name: "H100 SXM (sm_90)",
    sms: 132,
    max_warps: 64,
    max_blocks: 32,
    registers: 65_536,
    register_unit: 256,
    shared_bytes: 228 * 1024,
    shared_unit: 128,
    shared_reserved: 1024,
};

/// One launch's residency on `SmLimits`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Occupancy {
    /// Blocks resident on one SM at once.
    pub blocks_per_sm: u32,
    /// Their warps over the SM's warp slots, 0..1.
    pub fraction: f64,
    /// Blocks of the grid over the blocks the whole GPU holds at once.
    pub waves: f64,
    /// What bounds `blocks_per_sm`: "warps", "blocks", "registers" or "shared memory".
    pub limit: &'static str,
}

impl SmLimits {
    /// The occupancy of `blocks` blocks of `threads` threads, each thread using `registers`
    /// registers and each block `shared_bytes` of shared memory (static and dynamic). `None`
    /// where a block does not fit on an SM at all.
    pub fn occupancy(&self, threads: u32, registers: u32, shared_bytes: u32, blocks: u64) -> Option<Occupancy> {
        let warps = threads.div_ceil(32).max(1);
        let by_warps = self.max_warps / warps;
        let per_warp = (registers * 32).div_ceil(self.register_unit) * self.register_unit;
        let by_registers = if per_warp == 0 { self.max_blocks } else { (self.registers / per_warp) / warps };
        let per_block = (shared_bytes + self.shared_reserved).div_ceil(self.shared_unit) * self.shared_unit;
        let by_shared = self.shared_bytes / per_block;
        let (blocks_per_sm, limit) =
            [(by_warps, "warps"), (self.max_blocks, "blocks"), (by_registers, "registers"), (by_shared, "shared memory")].into_iter().min_by_key(|&(n, _)| n)?;
        (blocks_per_sm > 0).then(|| Occupancy {
            blocks_per_sm,
            fraction: (blocks_per_sm * warps) as f64 / self.max_warps as f64,
            waves: blocks as f64 / (blocks_per_sm as u64 * self.sms as u64) as f64,
            limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calculators_figures_for_an_h100() {
        // 256 threads at 32 registers: 8 blocks fill the 64 warps.
        let o = H100.occupancy(256, 32, 0, 8 * 132 * 3).unwrap();
        assert_eq!((o.blocks_per_sm, o.fraction, o.waves, o.limit), (8, 1.0, 3.0, "warps"));
        // 128 registers: 4 096 a warp, 16 warps of registers, two blocks: a quarter.
        let o = H100.occupancy(256, 128, 0, 132).unwrap();
        assert_eq!((o.blocks_per_sm, o.fraction, o.waves, o.limit), (2, 0.25, 0.5, "registers"));
        // 33 registers round up to 40 a thread (1 280 a warp): 51 warps, six 8-warp blocks.
        assert_eq!(H100.occupancy(256, 33, 0, 1).unwrap().blocks_per_sm, 6);
        // 48 KiB of shared memory (plus the 1 KiB reserve) a block: four blocks.
        let o = H100.occupancy(128, 32, 48 * 1024, 1).unwrap();
        assert_eq!((o.blocks_per_sm, o.limit), (4, "shared memory"));
        // Small blocks: at most 32 resident.
        assert_eq!(H100.occupancy(32, 16, 0, 1).unwrap().limit, "blocks");
        // A block that cannot fit.
        assert_eq!(H100.occupancy(1024, 255, 0, 1), None);
    }
}
