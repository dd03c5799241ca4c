//! The image decoders as the command line configures them: any bytes decode to an image or
//! give an error, within the pixel limit (a decompression bomb is an error, not an OOM).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // 4 Mpx: far below libFuzzer's memory limit, so a bomb that slipped past the header
    // check would be caught as an out-of-memory crash.
    tessera::io::set_max_pixels(1 << 22);
    let _ = tessera::io::load_from_memory(data);
});
