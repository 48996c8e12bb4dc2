#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shortlink_fuzz_bodies::code_scheme(data));
