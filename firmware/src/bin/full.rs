//! Every check of the suite: mean filter, Gaussian, exact local variance, pair
//! registration and SGM stereo.
#![no_std]
#![no_main]

tessera_firmware::firmware_main!(tessera_firmware::suite::FULL, "full");
