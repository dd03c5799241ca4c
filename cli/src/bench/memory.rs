//! The process's resident memory, for the suites that record what a run holds (Linux
//! `/proc/self/status`; `None` elsewhere).

/// Peak resident memory of this process in bytes (`VmHWM`), if the system tells.
pub fn peak_rss() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// Resident memory of this process now, in bytes (`VmRSS`).
pub fn current_rss() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// Resets the peak-RSS mark to the current resident memory (Linux >= 4.0: writing 5 to
/// clear_refs), so the next [`peak_rss`] is the peak of what runs in between.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn status_bytes(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}
