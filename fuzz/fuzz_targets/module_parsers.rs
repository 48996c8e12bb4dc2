#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shortlink_fuzz_bodies::module_parsers(data));
