//! Run-time compilation of the kernel files with NVRTC: finding the library, compiling a
//! [`Module`] to a CUBIN for one GPU architecture (or to PTX for others), reading `ptxas`'s
//! resource report from the log, and a cache of the results in memory and on disk.
//!
//! NVRTC comes from a CUDA toolkit or from the `nvidia-cuda-nvrtc` wheel (pinned to 13.0 so
//! its PTX loads on driver 580). Its directory is `$TESSERA_NVRTC_DIR`, else the toolkit's
//! (`$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`), else wherever the dynamic loader finds
//! `libnvrtc.so.13`. `libnvrtc-builtins` is loaded first, by absolute path: NVRTC looks for
//! it by name at compile time and fails with `NVRTC_ERROR_BUILTIN_OPERATION_FAILURE`
//! where the loader cannot see it.

use crate::kernels::{Module, COMMON_HEADER};
use cudarc::nvrtc::sys;
use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// What one compilation produced.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// A CUBIN for `arch` (`sm_XY`), or PTX text for `compute_XY`.
    pub image: Vec<u8>,
    /// NVRTC's log, with `ptxas -v`'s report for a CUBIN.
    pub log: String,
}

/// `ptxas`'s report on one kernel of a CUBIN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelResources {
    pub name: String,
    pub registers: u32,
    pub shared_bytes: u32,
    pub stack_bytes: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
}

/// The NVRTC library, loaded once per process; the error says where it was looked for.
pub fn load() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED.get_or_init(load_once).clone()
}

fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("TESSERA_NVRTC_DIR") {
        dirs.push(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("CUDA_PATH") {
        dirs.push(Path::new(&d).join("lib64"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs
}

fn load_once() -> Result<(), String> {
    let dirs = candidate_dirs();
    for dir in &dirs {
        let nvrtc = dir.join("libnvrtc.so.13");
        if !nvrtc.is_file() {
            continue;
        }
        // Kept loaded for the life of the process, with their symbols global, so that
        // cudarc's load by name and NVRTC's own load of the builtins find these.
        for lib in ["libnvrtc-builtins.so.13.0", "libnvrtc.so.13"] {
            let path = dir.join(lib);
            // SAFETY: loading NVIDIA's library runs its initialisers, which have no
            // preconditions.
            let loaded = unsafe { libloading::os::unix::Library::open(Some(&path), libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL) };
            match loaded {
                Ok(l) => std::mem::forget(l),
                Err(e) => return Err(format!("NVRTC at {}: {e}", path.display())),
            }
        }
        break;
    }
    // SAFETY: only tries to open the library by its names.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        let looked: Vec<_> = dirs.iter().map(|d| d.display().to_string()).collect();
        Err(format!(
            "NVRTC (libnvrtc.so.13) not found in {} or the loader's path; install the CUDA 13.0 toolkit or `pip install nvidia-cuda-nvrtc==13.0.88` and set TESSERA_NVRTC_DIR to its nvidia/cu13/lib",
            looked.join(", ")
        ))
    }
}

/// NVRTC's version, as (major, minor).
pub fn version() -> Result<(i32, i32), String> {
    load()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-pointers to ints.
    check(unsafe { sys::nvrtcVersion(&mut major, &mut minor) }, "nvrtcVersion")?;
    Ok((major, minor))
}

/// The architectures this NVRTC compiles for, as numbers (90 for sm_90).
pub fn supported_archs() -> Result<Vec<i32>, String> {
    load()?;
    let mut n = 0;
    // SAFETY: an out-pointer to an int, then a buffer of the size NVRTC reported.
    unsafe {
        check(sys::nvrtcGetNumSupportedArchs(&mut n), "nvrtcGetNumSupportedArchs")?;
        let mut archs = vec![0i32; n.max(0) as usize];
        check(sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()), "nvrtcGetSupportedArchs")?;
        Ok(archs)
    }
}

/// What to compile for a device of compute capability `major.minor`: its own `sm_XY`
/// CUBIN where this NVRTC knows the architecture, else PTX for the newest architecture it
/// knows below the device's (the driver compiles PTX for newer GPUs itself).
pub fn target_for(major: i32, minor: i32) -> Result<String, String> {
    let arch = major * 10 + minor;
    let known = supported_archs()?;
    if known.contains(&arch) {
        return Ok(format!("sm_{arch}"));
    }
    known
        .iter()
        .copied()
        .filter(|&a| a < arch)
        .max()
        .map(|a| format!("compute_{a}"))
        .ok_or_else(|| format!("NVRTC {:?} compiles for none of the architectures up to sm_{arch}", version().unwrap_or((0, 0))))
}

fn check(r: sys::nvrtcResult, what: &str) -> Result<(), String> {
    if r == sys::nvrtcResult::NVRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: NVRTC returns a static string for any result code.
    let msg = unsafe { CStr::from_ptr(sys::nvrtcGetErrorString(r)) }.to_string_lossy().into_owned();
    Err(format!("{what}: {msg}"))
}

/// Whether `module` is compiled without fused multiply-adds, so that its expressions round
/// as the core's do: the variance, contrast and glare files (the paper's methods compared
/// bit for bit, glare's fill), the panorama's blends, the stitch's shift refinement, its
/// consensus sets and its quality measures (the CPU's shifts, sets and coefficients to the
/// bit).
pub fn unfused(module: Module) -> bool {
    matches!(module, Module::Variance | Module::Contrast | Module::Glare | Module::Stitch | Module::Refine | Module::Consensus | Module::Quality)
}

/// The options a kernel file is compiled with: C++17, `ptxas -v` for the resource report,
/// and fused multiply-adds where the float bounds the tests state allow them (all but the
/// [`unfused`] files).
fn options(module: Module, arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".into(),
        format!("--fmad={}", !unfused(module)),
        // The exact NCC of 16-bit frames needs 128-bit products.
        "--device-int128".into(),
        "--ptxas-options=-v".into(),
        "-DTESSERA_NVRTC".into(),
    ]
}

/// Compiles `module` for `arch`: `sm_90` gives a CUBIN, `compute_90` PTX. The error holds
/// NVRTC's log.
pub fn compile(module: Module, arch: &str) -> Result<Compiled, String> {
    load()?;
    static MEMORY: OnceLock<Mutex<HashMap<(Module, String), Compiled>>> = OnceLock::new();
    let memory = MEMORY.get_or_init(Default::default);
    if let Some(c) = memory.lock().ok().and_then(|m| m.get(&(module, arch.to_string())).cloned()) {
        return Ok(c);
    }
    let key = cache_key(module, arch)?;
    let compiled = match disk_cache::read(&key) {
        Some(c) => c,
        None => {
            let c = compile_uncached(module, arch)?;
            disk_cache::write(&key, &c);
            c
        }
    };
    if let Ok(mut m) = memory.lock() {
        m.insert((module, arch.to_string()), compiled.clone());
    }
    Ok(compiled)
}

/// The compiled module's file name in the disk cache: what it is, and a hash of everything
/// the result depends on (sources, options, NVRTC's version).
fn cache_key(module: Module, arch: &str) -> Result<String, String> {
    let (major, minor) = version()?;
    let mut h = Fnv::default();
    h.write(module.source().as_bytes());
    h.write(COMMON_HEADER.1.as_bytes());
    for o in options(module, arch) {
        h.write(o.as_bytes());
    }
    h.write(&[major as u8, minor as u8]);
    let stem = module.file().trim_end_matches(".cu");
    Ok(format!("{stem}-{arch}-nvrtc{major}.{minor}-{:016x}", h.0))
}

/// 64-bit FNV-1a: a content hash for cache keys (not a defence against forgery; the cache
/// is the user's own directory).
struct Fnv(u64);
impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}
impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

fn compile_uncached(module: Module, arch: &str) -> Result<Compiled, String> {
    let to_c = |s: &str, what: &str| CString::new(s).map_err(|_| format!("{what} holds a NUL byte"));
    let src = to_c(module.source(), module.file())?;
    let name = to_c(module.file(), "file name")?;
    let header = to_c(COMMON_HEADER.1, COMMON_HEADER.0)?;
    let header_name = to_c(COMMON_HEADER.0, "header name")?;
    let headers = [header.as_ptr()];
    let include_names = [header_name.as_ptr()];
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is a live NUL-terminated string for the call.
    check(
        unsafe { sys::nvrtcCreateProgram(&mut prog, src.as_ptr(), name.as_ptr(), 1, headers.as_ptr(), include_names.as_ptr()) },
        "nvrtcCreateProgram",
    )?;
    let opts: Vec<CString> = options(module, arch).iter().map(|o| to_c(o, "option")).collect::<Result<_, _>>()?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: `prog` was created above; the options outlive the call.
    let compiled = unsafe { sys::nvrtcCompileProgram(prog, opt_ptrs.len() as i32, opt_ptrs.as_ptr()) };
    let log = program_log(prog);
    let result = check(compiled, &format!("compiling {} for {arch}", module.file()))
        .map_err(|e| format!("{e}\n{log}"))
        .and_then(|()| if arch.starts_with("sm_") { cubin(prog) } else { ptx(prog) });
    // SAFETY: `prog` is destroyed once, here.
    unsafe { sys::nvrtcDestroyProgram(&mut prog) };
    Ok(Compiled { image: result?, log })
}

fn program_log(prog: sys::nvrtcProgram) -> String {
    let mut size = 0usize;
    // SAFETY: `prog` is a live program; the buffer has the size NVRTC reported.
    unsafe {
        if sys::nvrtcGetProgramLogSize(prog, &mut size) != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        if sys::nvrtcGetProgramLog(prog, buf.as_mut_ptr().cast()) != sys::nvrtcResult::NVRTC_SUCCESS {
            return String::new();
        }
        String::from_utf8_lossy(buf.split(|&b| b == 0).next().unwrap_or(&[])).into_owned()
    }
}

fn cubin(prog: sys::nvrtcProgram) -> Result<Vec<u8>, String> {
    let mut size = 0usize;
    // SAFETY: `prog` compiled; the buffer has the size NVRTC reported.
    unsafe {
        check(sys::nvrtcGetCUBINSize(prog, &mut size), "nvrtcGetCUBINSize")?;
        let mut buf = vec![0u8; size];
        check(sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()), "nvrtcGetCUBIN")?;
        Ok(buf)
    }
}

fn ptx(prog: sys::nvrtcProgram) -> Result<Vec<u8>, String> {
    let mut size = 0usize;
    // SAFETY: `prog` compiled; the buffer has the size NVRTC reported (NUL included).
    unsafe {
        check(sys::nvrtcGetPTXSize(prog, &mut size), "nvrtcGetPTXSize")?;
        let mut buf = vec![0u8; size];
        check(sys::nvrtcGetPTX(prog, buf.as_mut_ptr().cast()), "nvrtcGetPTX")?;
        Ok(buf)
    }
}

/// Reads `ptxas -v`'s lines from a compile log: per kernel, registers, shared memory,
/// stack and spills.
pub fn resources(log: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    let number_before = |line: &str, unit: &str| -> Option<u32> {
        let i = line.find(unit)?;
        line[..i].split(|c: char| !c.is_ascii_digit()).rev().find(|s| !s.is_empty())?.parse().ok()
    };
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1).or_else(|| line.split("Function properties for ").nth(1)) {
            let name = rest.trim().trim_end_matches("' for 'sm_").split('\'').next().unwrap_or("").trim().to_string();
            if !name.is_empty() && out.last().map_or(true, |k| k.name != name) && !out.iter().any(|k| k.name == name) {
                out.push(KernelResources { name, ..Default::default() });
            }
            continue;
        }
        let Some(k) = out.last_mut() else { continue };
        if line.contains("bytes stack frame") {
            k.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
            k.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
            k.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
        }
        if line.contains("registers") {
            k.registers = number_before(line, "registers").unwrap_or(0);
            k.shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
        }
    }
    out
}

/// The on-disk cache: `$TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera/cuda`, else
/// `~/.cache/tessera/cuda`. Each entry is a small header (magic, lengths, a checksum)
/// followed by the image and the log; an entry that does not check out, or a directory
/// that cannot be written, is ignored.
mod disk_cache {
    use super::{Compiled, Fnv};
    use std::path::PathBuf;

    const MAGIC: &[u8; 8] = b"TSRACUC1";

    fn dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("TESSERA_CACHE_DIR") {
            return Some(PathBuf::from(d));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(base.join("tessera").join("cuda"))
    }

    fn checksum(image: &[u8], log: &[u8]) -> u64 {
        let mut h = Fnv::default();
        h.write(image);
        h.write(log);
        h.0
    }

    pub(super) fn read(key: &str) -> Option<Compiled> {
        let bytes = std::fs::read(dir()?.join(key)).ok()?;
        decode(&bytes)
    }

    pub(super) fn decode(bytes: &[u8]) -> Option<Compiled> {
        let header = bytes.get(..32)?;
        if &header[..8] != MAGIC {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(header[i..i + 8].try_into().unwrap());
        let (image_len, log_len, sum) = (word(8) as usize, word(16) as usize, word(24));
        let body = &bytes[32..];
        if body.len() != image_len.checked_add(log_len)? {
            return None;
        }
        let (image, log) = body.split_at(image_len);
        if checksum(image, log) != sum {
            return None;
        }
        Some(Compiled { image: image.to_vec(), log: String::from_utf8(log.to_vec()).ok()? })
    }

    pub(super) fn encode(c: &Compiled) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + c.image.len() + c.log.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(c.image.len() as u64).to_le_bytes());
        out.extend_from_slice(&(c.log.len() as u64).to_le_bytes());
        out.extend_from_slice(&checksum(&c.image, c.log.as_bytes()).to_le_bytes());
        out.extend_from_slice(&c.image);
        out.extend_from_slice(c.log.as_bytes());
        out
    }

    /// Writes through a temporary file and a rename, so a reader never sees half an entry.
    pub(super) fn write(key: &str, c: &Compiled) {
        let Some(dir) = dir() else { return };
        if std::fs::create_dir_all(&dir).is_err() {
            return;
        }
        let tmp = dir.join(format!("{key}.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, encode(c)).is_ok() && std::fs::rename(&tmp, dir.join(key)).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn entries_round_trip_and_damage_is_ignored() {
            let c = Compiled { image: vec![1, 2, 3, 250], log: "ptxas info".into() };
            let bytes = encode(&c);
            let back = decode(&bytes).unwrap();
            assert_eq!((back.image, back.log), (c.image.clone(), c.log.clone()));
            for i in 0..bytes.len() {
                let mut bad = bytes.clone();
                bad[i] ^= 0x40;
                assert!(decode(&bad).is_none(), "a flipped byte {i} was accepted");
            }
            assert!(decode(&bytes[..bytes.len() - 1]).is_none());
            assert!(decode(b"").is_none());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_get_their_own_cubin_or_the_newest_ptx_below_them() {
        let Ok(archs) = supported_archs() else {
            eprintln!("nvrtc: SKIPPED (no NVRTC here)");
            return;
        };
        assert!(archs.contains(&90) && archs.contains(&80), "{archs:?}");
        assert_eq!(target_for(9, 0).unwrap(), "sm_90");
        assert_eq!(target_for(8, 0).unwrap(), "sm_80");
        // A compute capability NVRTC 13.0 has never heard of gets PTX it can JIT.
        let newest = *archs.iter().max().unwrap();
        assert_eq!(target_for(99, 9).unwrap(), format!("compute_{newest}"));
        assert!(target_for(1, 0).is_err());
    }

    #[test]
    fn ptxas_reports_are_read_per_kernel() {
        let log = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'box_rows_u8' for 'sm_90'\n\
ptxas info    : Function properties for box_rows_u8\n\
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n\
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]\n\
ptxas info    : Compiling entry function 'mat_add_f32' for 'sm_90'\n\
ptxas info    : Function properties for mat_add_f32\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 10 registers, used 0 barriers, 380 bytes cmem[0]\n";
        let r = resources(log);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0], KernelResources { name: "box_rows_u8".into(), registers: 40, shared_bytes: 2048, stack_bytes: 16, spill_stores: 8, spill_loads: 4 });
        assert_eq!(r[1], KernelResources { name: "mat_add_f32".into(), registers: 10, ..Default::default() });
    }
}
