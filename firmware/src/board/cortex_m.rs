//! Cortex-M4F on QEMU's `mps2-an386`: code and constants in ZBT SSRAM1 at 0 (the board's
//! "flash"), static data, heap and stack in ZBT SSRAM2&3 at 0x2000_0000
//! (`memory/mps2-an386.x`). Start-up, vector table and exceptions are `cortex-m-rt`'s.

use core::ptr::{read_volatile, write_volatile};
use core::sync::atomic::{AtomicU32, Ordering};

pub const NAME: &str = "Cortex-M4F, QEMU mps2-an386 (thumbv7em-none-eabihf)";

extern "C" {
    // From cortex-m-rt's link.x and memory/mps2-an386.x.
    static __sheap: u8;
    static _stack_end: u8;
    static _stack_start: u8;
}

/// `[start, end)` of the heap: from the end of `.bss` to the bottom of the stack.
pub fn heap_region() -> (usize, usize) {
    (&raw const __sheap as usize, &raw const _stack_end as usize)
}

/// `[bottom, top)` of the stack.
pub fn stack_region() -> (usize, usize) {
    (&raw const _stack_end as usize, &raw const _stack_start as usize)
}

// The debug and SysTick registers (ARMv7-M ARM, C1.6 and B3.3).
const DEMCR: *mut u32 = 0xE000_EDFC as *mut u32;
const DWT_CTRL: *mut u32 = 0xE000_1000 as *mut u32;
const DWT_CYCCNT: *mut u32 = 0xE000_1004 as *mut u32;
const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;
/// QEMU's mps2 processor clock, which SysTick counts with CLKSOURCE = 1.
const SYSCLK_HZ: u64 = 25_000_000;
const SYST_RELOAD: u32 = 0x00ff_ffff;

/// SysTick wraps so far (the exception below counts them).
static WRAPS: AtomicU32 = AtomicU32::new(0);

#[cortex_m_rt::exception]
fn SysTick() {
    WRAPS.fetch_add(1, Ordering::Relaxed);
}

/// A fault reports itself and exits through the panic handler, instead of cortex-m-rt's
/// default loop that only the runner's timeout would end.
#[cortex_m_rt::exception]
unsafe fn HardFault(frame: &cortex_m_rt::ExceptionFrame) -> ! {
    panic!("HardFault at pc {:#010x}", frame.pc());
}

/// The counter the timings use, with a line saying what it counts.
pub enum Counter {
    /// The DWT cycle counter runs.
    Dwt,
    /// SysTick at the 25 MHz processor clock. QEMU runs it on its virtual clock: under
    /// `-icount shift=0` one instruction is one virtual nanosecond, so a tick is 40
    /// instructions; without `-icount` it counts host time.
    SysTick,
}

impl Counter {
    /// Starts the DWT cycle counter if the core has one that counts, else SysTick.
    pub fn start() -> Counter {
        // SAFETY: architected registers of every ARMv7-M core; QEMU reads an absent DWT
        // as zero and ignores writes to it.
        unsafe {
            write_volatile(DEMCR, read_volatile(DEMCR) | 1 << 24); // TRCENA
            write_volatile(DWT_CYCCNT, 0);
            write_volatile(DWT_CTRL, read_volatile(DWT_CTRL) | 1); // CYCCNTENA
            let a = read_volatile(DWT_CYCCNT);
            core::hint::black_box(a.wrapping_mul(3));
            if read_volatile(DWT_CYCCNT) != a {
                return Counter::Dwt;
            }
            write_volatile(SYST_RVR, SYST_RELOAD);
            write_volatile(SYST_CVR, 0);
            write_volatile(SYST_CSR, 0b111); // processor clock, exception on wrap, enabled
        }
        Counter::SysTick
    }

    pub fn describe(&self) -> &'static str {
        match self {
            Counter::Dwt => "cycles (DWT CYCCNT)",
            Counter::SysTick => "instructions (SysTick x 40 under QEMU -icount shift=0; QEMU has no DWT CYCCNT)",
        }
    }

    /// The count now (cycles, or instructions at a resolution of 40).
    pub fn now(&self) -> u64 {
        match self {
            // A 32-bit counter: the timed operations are differences well below 2^32.
            // SAFETY: a read of the running counter.
            Counter::Dwt => unsafe { read_volatile(DWT_CYCCNT) as u64 },
            Counter::SysTick => loop {
                // SysTick counts down; read the wraps on both sides of the value.
                let w = WRAPS.load(Ordering::Relaxed);
                // SAFETY: a read of the running counter.
                let v = unsafe { read_volatile(SYST_CVR) };
                if WRAPS.load(Ordering::Relaxed) == w {
                    let ticks = w as u64 * (SYST_RELOAD as u64 + 1) + (SYST_RELOAD - v) as u64;
                    // Virtual nanoseconds (= instructions under -icount shift=0).
                    break ticks * 1_000_000_000 / SYSCLK_HZ;
                }
            },
        }
    }

    /// Counts since `t0` (a value of [`Counter::now`]).
    pub fn since(&self, t0: u64) -> u64 {
        match self {
            Counter::Dwt => (self.now() as u32).wrapping_sub(t0 as u32) as u64,
            Counter::SysTick => self.now() - t0,
        }
    }
}
