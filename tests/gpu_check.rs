//! `scripts/gpu-check`, the one command for a GPU machine, fails cleanly where it cannot
//! run: no payload, or no GPU (exit code 2 and the reason, nothing appended to the record).
//! Building its payload is checked by `scripts/test`, after the release build it reuses.

mod common;

use std::process::Command;

fn gpu_check(args: &[&str]) -> std::process::Output {
    Command::new("bash").arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gpu-check")).args(args).output().unwrap()
}

#[test]
fn without_a_payload_it_says_how_to_build_one() {
    let out = gpu_check(&["run", "/nonexistent/payload"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("scripts/gpu-check build"));
}

#[test]
fn without_a_gpu_it_stops_saying_so_and_records_nothing() {
    if Command::new("nvidia-smi").arg("-L").output().is_ok_and(|o| o.status.success()) {
        eprintln!("a GPU is present here: gpu-check's no-GPU path cannot be checked");
        return;
    }
    let dir = common::temp_dir("gpu-check", "payload");
    // Any executables stand in for the payload's: the script stops before running them.
    let exe = std::env::current_exe().unwrap();
    for f in ["tessera", "conformance"] {
        std::fs::copy(&exe, dir.join(f)).unwrap();
    }
    let record = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/gpu.md")).unwrap();
    let out = gpu_check(&["run", dir.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no GPU here"), "{stderr}");
    let after = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/gpu.md")).unwrap();
    assert_eq!(record, after, "a run without a GPU must not touch docs/gpu.md");
    let _ = std::fs::remove_dir_all(&dir);
    let usage = gpu_check(&["frobnicate"]);
    assert_eq!(usage.status.code(), Some(64));
}
