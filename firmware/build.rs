//! Puts the board's memory map beside the runtime crate's linker script.
use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("arm") => {
            // cortex-m-rt's link.x includes memory.x from the search path.
            fs::copy("memory/mps2-an386.x", out.join("memory.x")).unwrap();
            println!("cargo:rustc-link-arg-bins=-Tlink.x");
        }
        Ok("aarch64") => {
            fs::copy("memory/qemu-virt.ld", out.join("qemu-virt.ld")).unwrap();
            println!("cargo:rustc-link-arg-bins=-Timage.ld");
            println!("cargo:rustc-link-arg-bins=-Tqemu-virt.ld");
        }
        _ => {}
    }
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory");
}
