//! What the shim tests share.

// Each test crate includes this module and uses a part of it.
#![allow(dead_code)]

#[path = "../../../tests/common/cases.rs"]
pub mod cases;

#[allow(unused_imports)]
pub use cases::{cases, cases_at, full, Coverage};

/// The shared real data (`shared/data`): `$TESSERA_DATA` if set, else the first
/// `shared/data` holding `stereo/` above the crate.
pub fn shared_data() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("TESSERA_DATA") {
        return d.into();
    }
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors().map(|a| a.join("shared/data")).find(|d| d.join("stereo").is_dir()).expect("shared/data/stereo above the crate; set TESSERA_DATA")
}

/// A xorshift generator seeded by `seed` (any value, 0 included): the tests' random pixels.
pub fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// Whether kernel `name` is `pattern`, where a `*` in the pattern stands for any text (the
/// kernel lists of the compile and occupancy checks).
pub fn kernel_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        Some((a, b)) => name.len() >= a.len() + b.len() && name.starts_with(a) && name.ends_with(b),
        None => pattern == name,
    }
}
