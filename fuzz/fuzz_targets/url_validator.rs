#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shortlink_fuzz_bodies::url_validator(data));
