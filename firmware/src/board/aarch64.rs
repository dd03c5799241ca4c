//! Bare-metal AArch64 on QEMU's `virt` board (Cortex-A72 at EL1): `aarch64-rt` starts the
//! core with an identity map (RAM cacheable, the rest device memory), the image at
//! 0x4008_0000 (`memory/qemu-virt.ld`), the heap after it.

use aarch64_rt::{exception_handlers, initial_pagetable, ExceptionHandlers, InitialPagetable};

pub const NAME: &str = "AArch64 Cortex-A72, QEMU virt (aarch64-unknown-none)";

/// Where the runner's `-m 128M` RAM ends.
const RAM_END: usize = 0x4000_0000 + (128 << 20);
/// Bytes of the boot stack, in 4 KiB pages (the `entry!` in `firmware_main!`).
pub const STACK_PAGES: usize = 32;

// Level-1 block descriptors of 1 GiB each (Arm ARM D8.3): valid block, access flag, and the
// MAIR index of aarch64-rt's default MAIR (0: device nGnRE, 1: normal write-back).
const BLOCK: usize = 0b01 | 1 << 10;
const DEVICE: usize = BLOCK | 1 << 54; // never executable
const NORMAL: usize = BLOCK | 1 << 2 | 0b11 << 8; // index 1, inner shareable

initial_pagetable!({
    let mut idmap = [0; 512];
    idmap[0] = DEVICE; // 0 .. 1 GiB: the UART, GIC and the rest of virt's devices
    idmap[1] = NORMAL | 0x4000_0000; // 1 .. 2 GiB: RAM
    InitialPagetable(idmap)
});

struct Exceptions;
// Every exception panics (aarch64-rt's default handlers), reaching the panic handler.
impl ExceptionHandlers for Exceptions {}
exception_handlers!(Exceptions);

extern "C" {
    // From aarch64-rt's image.ld.
    static boot_stack_begin: u8;
    static boot_stack_end: u8;
    static dma_region: u8;
}

/// `[start, end)` of the heap: from the end of the image to the end of RAM.
pub fn heap_region() -> (usize, usize) {
    (&raw const dma_region as usize, RAM_END)
}

/// `[bottom, top)` of the stack.
pub fn stack_region() -> (usize, usize) {
    (&raw const boot_stack_begin as usize, &raw const boot_stack_end as usize)
}

/// The PMU: event counter 0 counts INST_RETIRED (event 0x08), which QEMU provides under
/// `-icount` (exact counts); without it the counter stays at zero.
pub enum Counter {
    Instructions,
    /// The cycle counter, when QEMU does not count instructions.
    Cycles,
}

impl Counter {
    pub fn start() -> Counter {
        // SAFETY: PMU registers of every Armv8-A core, accessible at EL1.
        unsafe {
            core::arch::asm!(
                "msr pmselr_el0, xzr",
                "msr pmxevtyper_el0, {event}", // counter 0 counts INST_RETIRED, at EL1 too
                "msr pmcntenset_el0, {enable}", // the cycle counter and counter 0 on
                "msr pmcr_el0, {control}", // enable, reset both
                "isb",
                event = in(reg) 0x08u64,
                enable = in(reg) (1u64 << 31) | 1,
                control = in(reg) 0b111u64,
                options(nostack),
            );
        }
        let a = Counter::Instructions.now();
        core::hint::black_box(a.wrapping_mul(3));
        if Counter::Instructions.now() != a {
            Counter::Instructions
        } else {
            Counter::Cycles
        }
    }

    pub fn describe(&self) -> &'static str {
        match self {
            Counter::Instructions => "instructions retired (PMU event 0x08, QEMU -icount)",
            Counter::Cycles => "cycles (PMCCNTR_EL0; QEMU counts no instructions without -icount)",
        }
    }

    pub fn now(&self) -> u64 {
        let v: u64;
        // SAFETY: reads of the running counters.
        unsafe {
            match self {
                Counter::Instructions => core::arch::asm!("mrs {}, pmevcntr0_el0", out(reg) v, options(nomem, nostack)),
                Counter::Cycles => core::arch::asm!("mrs {}, pmccntr_el0", out(reg) v, options(nomem, nostack)),
            }
        }
        v
    }

    /// Counts since `t0` (a value of [`Counter::now`]); the event counter has 32 bits.
    pub fn since(&self, t0: u64) -> u64 {
        match self {
            Counter::Instructions => (self.now() as u32).wrapping_sub(t0 as u32) as u64,
            Counter::Cycles => self.now().wrapping_sub(t0),
        }
    }
}
