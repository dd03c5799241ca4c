//! The mean filter alone: the smallest useful firmware, for the footprint table.
#![no_std]
#![no_main]

tessera_firmware::firmware_main!(tessera_firmware::suite::MEAN_ONLY, "mean");
