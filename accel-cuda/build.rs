//! With the `shim` feature, compiles the CUDA host shim and every kernel file as C++20 for
//! the CPU (g++ or clang++ through `cc`), so tests run the very `.cu` sources NVRTC
//! compiles for the GPU. `TESSERA_SHIM_SANITIZE=thread` or `=address` builds them with that
//! sanitizer (the test binary then needs the runtime preloaded; see README.md).

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-changed=shim");
    println!("cargo:rerun-if-env-changed=TESSERA_SHIM_SANITIZE");
    println!("cargo:rustc-check-cfg=cfg(shim_sanitizer, values(\"thread\", \"address\"))");
    tuning_tables();
    if std::env::var_os("CARGO_FEATURE_SHIM").is_none() {
        return;
    }
    let sanitizer = std::env::var("TESSERA_SHIM_SANITIZE").unwrap_or_default();
    if !matches!(sanitizer.as_str(), "" | "thread" | "address") {
        panic!("TESSERA_SHIM_SANITIZE={sanitizer}: expected thread or address");
    }
    if !sanitizer.is_empty() {
        println!("cargo:rustc-cfg=shim_sanitizer=\"{sanitizer}\"");
    }
    let mut kernels: Vec<_> = std::fs::read_dir("kernels")
        .expect("kernels/")
        .map(|e| e.expect("kernels/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    kernels.sort();
    let mut instrumented = shim_build(&sanitizer);
    instrumented.file("shim/selftest.cu").files(&kernels);
    let fibers = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "x86_64");
    if sanitizer == "thread" && fibers {
        // The launcher's own bookkeeping is left out of ThreadSanitizer's view: it tells
        // ThreadSanitizer of its fibers and barriers itself (shim/shim.cpp), and only the
        // kernels' accesses are to be checked.
        let mut launcher = shim_build("");
        launcher.define("TESSERA_SHIM_TSAN_FIBERS", None).opt_level(1).debug(true).file("shim/shim.cpp");
        launcher.compile("tessera_shim_launcher");
        println!("cargo:rustc-link-lib=static:+whole-archive=tessera_shim_launcher");
    } else {
        instrumented.file("shim/shim.cpp");
    }
    instrumented.compile("tessera_shim");
    let out = std::env::var("OUT_DIR").unwrap();
    println!("cargo:rustc-link-search=native={}", Path::new(&out).display());
    // The kernels register themselves from static constructors that nothing references:
    // keep every object of the archive.
    println!("cargo:rustc-link-lib=static:+whole-archive=tessera_shim");
    println!("cargo:rustc-link-lib=dylib=stdc++");
    match sanitizer.as_str() {
        "thread" => println!("cargo:rustc-link-lib=dylib=tsan"),
        "address" => println!("cargo:rustc-link-lib=dylib=asan"),
        _ => {}
    }
}

/// The shim's compiler settings: C++20, the kernels' include paths and the shim header
/// forced in, with `sanitizer`'s instrumentation (or none for "").
fn shim_build(sanitizer: &str) -> cc::Build {
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++20")
        .opt_level(2)
        .define("TESSERA_SHIM", None)
        .include("shim")
        .include("kernels")
        .flag("-include")
        .flag("shim/cuda_shim.h")
        .flag("-pthread")
        // No fused multiply-adds (GCC contracts by default where the target has them):
        // expressions round as written, as the core's do.
        .flag("-ffp-contract=off")
        .flag_if_supported("-Wno-unused-parameter")
        // `.cu` is not a C++ extension to g++: say the language.
        .flag("-x")
        .flag("c++")
        .cargo_metadata(false);
    if !sanitizer.is_empty() {
        build.flag(format!("-fsanitize={sanitizer}")).flag("-fno-omit-frame-pointer").opt_level(1).debug(true);
    }
    build
}

/// `$OUT_DIR/tuning_tables.rs`: every `tuning/*.json` as (file stem, contents), so that the
/// chosen kernel designs travel inside the binary (`src/tuning.rs`).
fn tuning_tables() {
    println!("cargo:rerun-if-changed=tuning");
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("tuning");
    let mut tables: Vec<_> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect())
        .unwrap_or_default();
    tables.sort();
    let mut code = String::from("&[\n");
    for path in &tables {
        let stem = path.file_stem().unwrap().to_string_lossy();
        code += &format!("    ({stem:?}, include_str!({:?})),\n", path.display().to_string());
    }
    code += "]\n";
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("tuning_tables.rs");
    std::fs::write(out, code).expect("writing tuning_tables.rs");
}
