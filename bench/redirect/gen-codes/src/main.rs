//! bench-gen-codes: the redirect benchmark's data.
//!
//! Usage: bench-gen-codes SECRET_FILE COUNT OUT_DIR [HOT] [BOGUS] [RULED]
//!
//! - stdout: RESP `SET sl:c:<code> 1|L|302|0|0|https://example.com/<n>` for n in 0..COUNT, then
//!   `SET sl:meta:projection` with the scheme's fingerprint (Redis now holds every link, as after
//!   the sidecar's resync), for
//!   `redis-cli --pipe`;
//! - OUT_DIR/uniform.txt: every code, one path (`/<code>`) a line, in sequence order (codes are
//!   already a keyed permutation, so neighbours are unrelated);
//! - OUT_DIR/hot.txt: HOT codes (default 1000) spread evenly over the sequence;
//! - OUT_DIR/bogus.txt: BOGUS (default 100000) random strings of the generated shape whose check
//!   character is wrong (the module rejects them without asking Redis);
//! - OUT_DIR/sample.txt: `<code> <target>` for a few codes, and `<code> 404` for a valid code that
//!   is not loaded, for the correctness check;
//! - with RULED > 0 (issue 34's cells): RULED more codes whose records carry five click-time rules
//!   (device, language, country, query, then a 50/50 split: a desktop click from the US in
//!   English without the query walks every condition, looks its country up and lands in the
//!   split), in OUT_DIR/rules-uniform.txt and, HOT of them, rules-hot.txt; HOT codes with a
//!   `max_visits` no benchmark reaches (every click counted), in capped-hot.txt; and HOT codes
//!   with a preview card (issue 35: the record's card flag and the card in `sl:p:<code>`), in
//!   card-hot.txt; and HOT codes with a click id parameter (issue 54: the module appends
//!   `sl_click=<id>` to `Location` and queues the id), in clickid-hot.txt. Their records and
//!   cards come from `shortlink_wire`, as the sidecar writes them.

use shortcode::{parse_hex_secret, CodeScheme, Shape, ALPHABET};
use shortlink_wire::click_id::ClickIdParam;
use shortlink_wire::keys::{link_key, preview_key};
use shortlink_wire::preview::Card;
use shortlink_wire::record::{Extras, Record};
use shortlink_wire::rules::{Action, Condition, Device, Rule, Target, Variant};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

const BODY_LEN: u8 = 6;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-gen-codes: {e}");
            ExitCode::FAILURE
        }
    }
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: Option<T>) -> Result<T, String> {
    match args.get(i) {
        Some(s) => s.parse().map_err(|_| format!("bad argument {s:?}")),
        None => default.ok_or_else(|| {
            "usage: bench-gen-codes SECRET_FILE COUNT OUT_DIR [HOT] [BOGUS] [RULED]".to_owned()
        }),
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secret_file: String = arg(&args, 0, None)?;
    let count: u64 = arg(&args, 1, None)?;
    let out: String = arg(&args, 2, None)?;
    let hot: u64 = arg(&args, 3, Some(1000))?;
    let bogus: u64 = arg(&args, 4, Some(100_000))?;
    let ruled: u64 = arg(&args, 5, Some(0))?;
    let hot = hot.min(count).max(1);

    let text = std::fs::read_to_string(&secret_file).map_err(|e| format!("{secret_file}: {e}"))?;
    let secret = parse_hex_secret(&text).map_err(|e| e.to_string())?;
    let scheme = CodeScheme::new(&secret, BODY_LEN, true).map_err(|e| e.to_string())?;
    let out = Path::new(&out);
    let create = |name: &str| -> Result<BufWriter<File>, String> {
        let path = out.join(name);
        File::create(&path)
            .map(|f| BufWriter::with_capacity(1 << 20, f))
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    let io = |e: io::Error| e.to_string();

    let mut resp = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let mut uniform = create("uniform.txt")?;
    let mut hot_file = create("hot.txt")?;
    let mut sample = create("sample.txt")?;
    let hot_step = count / hot;
    for n in 0..count {
        let code = scheme.encode(n).map_err(|e| e.to_string())?;
        let key = format!("sl:c:{code}");
        let value = format!("1|L|302|0|0|https://example.com/{n}");
        write!(
            resp,
            "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
            key.len(),
            value.len()
        )
        .map_err(io)?;
        writeln!(uniform, "/{code}").map_err(io)?;
        if n % hot_step == 0 && n / hot_step < hot {
            writeln!(hot_file, "/{code}").map_err(io)?;
        }
        if n < 3 || n == count - 1 {
            writeln!(sample, "{code} https://example.com/{n}").map_err(io)?;
        }
    }
    if ruled > 0 {
        let mut rules_uniform = create("rules-uniform.txt")?;
        let mut rules_hot = create("rules-hot.txt")?;
        let mut capped_hot = create("capped-hot.txt")?;
        let mut card_hot = create("card-hot.txt")?;
        let mut clickid_hot = create("clickid-hot.txt")?;
        let five_rules = five_rules();
        let capped = Extras {
            max_visits: 1 << 62,
            ..Extras::default()
        };
        let carded = Extras {
            has_card: true,
            ..Extras::default()
        };
        let with_click_id = Extras {
            click_id_param: ClickIdParam::parse(b"sl_click"),
            ..Extras::default()
        };
        let card = Card {
            title: "Spring sale: 20% off everything today",
            description: "Our biggest sale of the season, in every shop and online until Sunday.",
            image: "https://cdn.example.com/spring-sale-1200x630.jpg",
            site_name: "Example Shop",
        }
        .encode();
        let mut set = |key: &str, value: &[u8]| -> io::Result<()> {
            write!(
                resp,
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n",
                key.len(),
                value.len()
            )?;
            resp.write_all(value)?;
            resp.write_all(b"\r\n")
        };
        let ruled_hot_step = (ruled / hot.min(ruled)).max(1);
        for i in 0..ruled + 3 * hot {
            let n = count + 1 + i;
            let code = scheme.encode(n).map_err(|e| e.to_string())?;
            let target = format!("https://example.com/{n}");
            let (extras, list) = if i < ruled {
                (&five_rules, None)
            } else if i < ruled + hot {
                (&capped, Some(&mut capped_hot))
            } else if i < ruled + 2 * hot {
                (&with_click_id, Some(&mut clickid_hot))
            } else {
                set(&preview_key(&code), &card).map_err(io)?;
                (&carded, Some(&mut card_hot))
            };
            let value = Record::Live {
                status: 302,
                expires_at: 0,
                flags: 0,
                target: &target,
                extras: Some(extras),
            }
            .encode();
            set(&link_key(&code), &value).map_err(io)?;
            if let Some(list) = list {
                writeln!(list, "/{code}").map_err(io)?;
                continue;
            }
            writeln!(rules_uniform, "/{code}").map_err(io)?;
            if i % ruled_hot_step == 0 && i / ruled_hot_step < hot {
                writeln!(rules_hot, "/{code}").map_err(io)?;
            }
        }
        for mut f in [rules_uniform, rules_hot, capped_hot, card_hot, clickid_hot] {
            f.flush().map_err(io)?;
        }
    }
    // As the sidecar sets it: the time and the code scheme's fingerprint, without which the
    // module would not trust its check character (bogus codes would be looked up).
    let marker = format!("0 {}", scheme.fingerprint());
    write!(
        resp,
        "*3\r\n$3\r\nSET\r\n$18\r\nsl:meta:projection\r\n${}\r\n{marker}\r\n",
        marker.len()
    )
    .map_err(io)?;
    resp.flush().map_err(io)?;
    let missing = scheme.encode(count).map_err(|e| e.to_string())?;
    writeln!(sample, "{missing} 404").map_err(io)?;

    // Bogus: random bodies with a wrong check character (61 of 62 random strings of the shape).
    let mut bogus_file = create("bogus.txt")?;
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ count;
    let mut made = 0;
    while made < bogus {
        let mut code = [0u8; BODY_LEN as usize + 1];
        for c in code.iter_mut() {
            // xorshift64*: plenty for picking characters.
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            *c = ALPHABET[(rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize % 62];
        }
        if scheme.shape(&code) == Shape::BadCheck {
            bogus_file.write_all(b"/").map_err(io)?;
            bogus_file.write_all(&code).map_err(io)?;
            bogus_file.write_all(b"\n").map_err(io)?;
            made += 1;
        }
    }
    for mut f in [uniform, hot_file, sample, bogus_file] {
        f.flush().map_err(io)?;
    }
    Ok(())
}

/// Device, language, country and query rules that a desktop click from the US in English
/// without `?src=email` fails one by one, then a 50/50 split that answers it.
fn five_rules() -> Extras {
    let target = |url: &str| Target {
        url: url.as_bytes().into(),
        status: 302,
        forward_query: false,
    };
    let rule = |condition: Condition, url: &str| Rule {
        conditions: Box::new([condition]),
        action: Action::Target(target(url)),
    };
    let split = Rule {
        conditions: Box::new([]),
        action: Action::Split {
            variants: [
                Variant {
                    weight: 1,
                    target: target("https://example.com/a"),
                },
                Variant {
                    weight: 1,
                    target: target("https://example.com/b"),
                },
            ]
            .into(),
            sticky: true.into(),
        },
    };
    Extras {
        rules: vec![
            rule(
                Condition::Device(Device::Ios.bit() | Device::Android.bit()),
                "https://apps.example/install",
            ),
            rule(
                Condition::Language(vec![b"pt"[..].into(), b"es"[..].into()].into()),
                "https://example.com/iberia",
            ),
            rule(
                Condition::Country(vec![*b"PT", *b"BR", *b"ES"].into()),
                "https://example.com/shop-pt",
            ),
            rule(
                Condition::Query {
                    name: b"src"[..].into(),
                    value: Some(b"email"[..].into()),
                },
                "https://example.com/email",
            ),
            split,
        ]
        .into(),
        ..Extras::default()
    }
}
