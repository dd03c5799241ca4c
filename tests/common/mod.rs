//! What the workspace-level tests share.

use std::path::{Path, PathBuf};

/// The shared real data (`shared/data`): `$TESSERA_DATA` if set, else the first
/// `shared/data` holding `stereo/` beside the project root or one of its ancestors
/// (`../shared/data` in the usual layout; a git worktree one level deeper finds it too).
/// Panics with the places it looked: the suite needs the real data.
pub fn shared_data() -> PathBuf {
    if let Some(d) = std::env::var_os("TESSERA_DATA") {
        return d.into();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    root.ancestors()
        .map(|a| a.join("shared/data"))
        .find(|d| d.join("stereo").is_dir())
        .unwrap_or_else(|| panic!("no shared/data/stereo above {}; set TESSERA_DATA", root.display()))
}
