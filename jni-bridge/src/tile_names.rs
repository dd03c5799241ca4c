//! `String[] Native.nativeTileNames(...)`: the tiles a file-name pattern names
//! (`tessera::tile_names`), for the Grid Stitching dialog's "Names" field.

use crate::error::bad_arg;
use crate::guarded;
use jni::objects::{JClass, JObject, JObjectArray, JString};
use jni::sys::{jboolean, jint};
use jni::{jni_str, EnvUnowned};

/// `String[] nativeTileNames(String pattern, int channels, int timePoints, int cycles,
/// boolean customOrder)`: element 0 is `"C T K COLS ROWS"` (the channels, time points and
/// cycles of the run, the names' counts reconciled with those the dialog gives, 1 meaning
/// not given; the grid's columns and rows where the names give them, else `0 0`), then the
/// files in the grid's order. `customOrder`: the dialog asks for an acquisition order or
/// start corner other than the default, which names that place each tile refuse.
/// `IllegalArgumentException` for a bad pattern, no file, a missing tile, counts that
/// disagree.
#[unsafe(no_mangle)]
pub extern "system" fn Java_tessera_ij_Native_nativeTileNames<'l>(
    mut env: EnvUnowned<'l>,
    _c: JClass<'l>,
    pattern: JString<'l>,
    channels: jint,
    time_points: jint,
    cycles: jint,
    custom_order: jboolean,
) -> JObjectArray<'l> {
    guarded(&mut env, |env| {
        if pattern.is_null() {
            return Err(bad_arg("tile names: the pattern is null"));
        }
        let count = |v: jint, what: &str| usize::try_from(v).ok().filter(|&v| v >= 1).ok_or_else(|| bad_arg(format!("tile names: {what} must be at least 1, got {v}")));
        let (c, t, k) = (count(channels, "channels")?, count(time_points, "time points")?, count(cycles, "cycles")?);
        let path = std::path::PathBuf::from(pattern.try_to_string(env)?);
        let named = tessera::tile_names::resolve(&path).map_err(|e| bad_arg(format!("{e:#}")))?;
        let (c, t, k) = named.planes(c, t, k).map_err(|e| bad_arg(format!("{e:#}")))?;
        let grid = named.grid(None, custom_order).map_err(|e| bad_arg(format!("{e:#}")))?;
        let (cols, rows) = named.grid.filter(|_| grid.is_some()).unwrap_or((0, 0));
        let out = env.new_object_array(1 + named.files.len() as jint, jni_str!("java/lang/String"), JObject::null())?;
        let head = JString::from_str(env, format!("{c} {t} {k} {cols} {rows}"))?;
        out.set_element(env, 0, &head)?;
        for (i, f) in named.files.iter().enumerate() {
            let s = JString::from_str(env, f.display().to_string())?;
            out.set_element(env, i + 1, &s)?;
            // Freed as they go: a large grid would overflow the frame's local references.
            env.delete_local_ref(s);
        }
        Ok(out)
    })
}
