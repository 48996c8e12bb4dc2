//! The progress bar the long subcommands (export, resync, orphans) draw: a leaf of its
//! own, so they need nothing of `cli/mod.rs`.

/// A progress bar on stderr (drawn only when stderr is a terminal).
pub fn progress_bar(len: u64, unit: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    let template = format!(
        "{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{human_pos}}/{{human_len}} {unit} \
         ({{per_sec}}, {{eta}} left)"
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}
